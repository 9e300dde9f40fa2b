#!/usr/bin/env bash
# Builds a free-threaded CPython 3.13 (--disable-gil) from Debian 13's source package into
# ${STREAMBRIDGE_FT_PREFIX:-$HOME/.cache/streambridge/python3.13t} (outside the clone, so a
# second run finds it), once, with pip, pytest, Hypothesis and NumPy; prints its python.
# About 2.5 minutes on this project's 2-core machine. Needs root (a deb-src line for Debian
# 13 is added for the download and removed).
#   python=$(bash scripts/free-threaded-python.sh)
set -euo pipefail
prefix=${STREAMBRIDGE_FT_PREFIX:-$HOME/.cache/streambridge/python3.13t}
# Ready once the last step below has run (a build cut short is built again).
if [ -f "$prefix/.ready" ]; then echo "$prefix/bin/python3.13t"; exit 0; fi
work=$(mktemp -d)
# What the build needs (dpkg-source, and the headers of the modules pip and the tests use).
need=()
for pkg in dpkg-dev libssl-dev zlib1g-dev libffi-dev libbz2-dev liblzma-dev libsqlite3-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
src_list=/etc/apt/sources.list.d/streambridge-trixie-src.list
trap 'rm -f "$src_list"' EXIT # also where a step fails: the line is never left behind
echo "deb-src http://deb.debian.org/debian trixie main" >"$src_list"
apt-get update -qq >&2
[ ${#need[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
(cd "$work" && apt-get source -qq --download-only python3.13 >&2 && dpkg-source -x --skip-patches python3.13_*.dsc src >&2)
rm -f "$src_list"
cd "$work/src"
./configure -q --disable-gil --prefix="$prefix" --with-ensurepip=install >&2
make -s -j"$(nproc)" >&2
make -s altinstall >&2
cd /
rm -rf "$prefix/lib/python3.13t/test" "$work"
"$prefix/bin/python3.13t" -m pip install -q --root-user-action=ignore --only-binary :all: pytest hypothesis numpy >&2
touch "$prefix/.ready"
echo "$prefix/bin/python3.13t"
