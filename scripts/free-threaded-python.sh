#!/usr/bin/env bash
# Builds a free-threaded CPython (--disable-gil) into
# ${STREAMBRIDGE_FT_PREFIX:-$HOME/.cache/streambridge/python<VERSION>t} (outside the clone, so
# a second run finds it), once, with pip, pytest, Hypothesis and NumPy; prints its python.
#   python=$(bash scripts/free-threaded-python.sh [VERSION] [--with-gil])
#   bash scripts/free-threaded-python.sh --built   # each free-threaded one built so far, a line each; builds none
# --with-gil: the same source with the same `configure` less --disable-gil, into
# .../python<VERSION> (no "t"): the GIL build a free-threaded one is measured against
# (bench/threads_bench.py's one-thread row; scripts/gpu-ft.sh runs both where both are packed).
# VERSION 3.13 (the default, CI's): Debian 13's source package (a deb-src line for Debian 13 is
# added for the download and removed; needs root), about 2.5 minutes on this project's 2-core
# machine. VERSION 3.14: CPython's own source at tag v$CPYTHON_314 (no Debian release ships
# 3.14 yet), as the Go module proxy serves github.com/python/cpython, which `go mod download`
# checks against Go's checksum database (sum.golang.org), about 4 minutes.
set -euo pipefail
VERSIONS="3.13 3.14"
CPYTHON_314=3.14.7
t=t # the ABI suffix of the build: "t" free-threaded, "" with the GIL (--with-gil)
prefix_of() { echo "${STREAMBRIDGE_FT_PREFIX:-$HOME/.cache/streambridge/python${1}$t}"; }
# Ready once the last step below has run (a build cut short is built again).
built() { local p; p=$(prefix_of "$1"); [ -f "$p/.ready" ] && [ -x "$p/bin/python${1}$t" ] && echo "$p/bin/python${1}$t"; }
if [ "${1:-}" = --built ]; then
  for v in $VERSIONS; do built "$v" || true; done
  exit 0
fi
version=3.13
configure_gil=--disable-gil
for arg in "$@"; do
  case $arg in
  --with-gil) t= configure_gil= ;;
  *) version=$arg ;;
  esac
done
case " $VERSIONS " in *" $version "*) ;; *) echo "free-threaded-python.sh: builds one of $VERSIONS, not $version" >&2; exit 2 ;; esac
prefix=$(prefix_of "$version")
built "$version" && exit 0
work=$(mktemp -d)
# What the build needs (dpkg-source, and the headers of the modules pip and the tests use).
need=()
for pkg in dpkg-dev libssl-dev zlib1g-dev libffi-dev libbz2-dev liblzma-dev libsqlite3-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
src_list=/etc/apt/sources.list.d/streambridge-trixie-src.list
trap 'rm -f "$src_list"' EXIT # also where a step fails: the line is never left behind
if [ "$version" = 3.13 ]; then
  echo "deb-src http://deb.debian.org/debian trixie main" >"$src_list"
fi
if [ "$version" = 3.13 ] || [ ${#need[@]} -gt 0 ]; then apt-get update -qq >&2; fi
[ ${#need[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
if [ "$version" = 3.13 ]; then
  (cd "$work" && apt-get source -qq --download-only python3.13 >&2 && dpkg-source -x --skip-patches python3.13_*.dsc src >&2)
  rm -f "$src_list"
else
  # A module zip keeps no file modes: the scripts the build runs are made executable again.
  dir=$(cd "$work" && GOMODCACHE="$work/mod" GOFLAGS=-modcacherw \
    go mod download -json "github.com/python/cpython@v$CPYTHON_314+incompatible" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { echo "free-threaded-python.sh: the Go module proxy gave no CPython $CPYTHON_314" >&2; exit 1; }
  cp -r "$dir" "$work/src" && chmod -R u+w "$work/src"
  grep -rlI '^#!' "$work/src" | xargs chmod +x
fi
cd "$work/src"
./configure -q $configure_gil --prefix="$prefix" --with-ensurepip=install >&2
make -s -j"$(nproc)" >&2
make -s altinstall >&2
cd /
rm -rf "$prefix/lib/python${version}$t/test" "$work"
"$prefix/bin/python${version}$t" -m pip install -q --root-user-action=ignore --only-binary :all: pytest hypothesis numpy >&2
touch "$prefix/.ready"
echo "$prefix/bin/python${version}$t"
