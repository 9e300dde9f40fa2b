#!/usr/bin/env bash
# Packs the CPython PYTHON (its interpreter, standard library and C headers, without what
# builds or edits and without debug sections; the headers for bench/call_parts.py's bare
# extension, built there) with the package in PKGDIR/streambridge into OUT.tar.xz, for a
# GPU machine that has only its own CPython (scripts/gpu-ft.sh unpacks it: bin/, include/, lib/
# and streambridge/ at the top, so PYTHONPATH=<where unpacked>).
#   bash scripts/pack-python.sh PYTHON PKGDIR OUT.tar.xz
set -euo pipefail
py=$1
pkg=$2
out=$3
name=$(basename "$py")                     # python3.14t
prefix=$(dirname "$(dirname "$(readlink -f "$py")")")
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/include"
cp "$py" "$stage/bin/$name"
tar -C "$prefix/lib" --exclude=__pycache__ --exclude='config-*' --exclude=idlelib --exclude=ensurepip \
  --exclude=tkinter --exclude=pydoc_data --exclude='site-packages/pip' -cf - "$name" | tar -C "$stage/lib" -xf -
cp -r "$prefix/include/$name" "$stage/include/"
cp -r "$pkg/streambridge" "$stage/"
# Debug sections are most of an unstripped interpreter (39 MB of 3.14t's): the symbols stay,
# for native stacks.
find "$stage" \( -name "$name" -o -name '*.so' \) -type f -exec strip --strip-debug {} +
tar -cJf "$out" -C "$stage" bin include lib streambridge
