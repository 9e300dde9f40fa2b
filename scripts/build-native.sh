#!/usr/bin/env bash
# Builds streambridge's native module into python/streambridge/_native/.
#   scripts/build-native.sh INCLUDE_DIRS EXT_SUFFIX
# gopy generates the Go and C glue for ./pyshim, running pybindgen under GOPY_PYTHON
# (Debian's /usr/bin/python3 with python3-pybindgen); the generated code compiles against
# any CPython 3's headers. It is then built for the target interpreter: INCLUDE_DIRS are
# its header folders (space-separated), EXT_SUFFIX its extension suffix, such as
# .cpython-312-x86_64-linux-gnu.so. No -lpython: an extension's symbols resolve at import.
# STREAMBRIDGE_GO_PACKAGES: more Go packages (import paths or ./dirs, space-separated) to
# export in the same module, each then importable as streambridge.ext.<name> (docs/go-functions.md, "Your
# own Go kernels"): one Go runtime in the process, one bridge shared with streambridge.
# STREAMBRIDGE_GO_MODULES: the folders of the modules those packages live in, where not in
# this one: for the build, go.mod requires each (replaced by its folder); go.mod and go.sum
# are put back when the build ends. (Not a Go workspace: gopy v0.5.0 builds with a fixed
# -mod=mod, which workspace mode refuses.)
set -euo pipefail
cd "$(dirname "$0")/.."
export GOWORK=off # a go.work above the checkout would meet gopy's -mod=mod (see above)
include=$1
suffix=$2
gen=build/_gopy # "_": outside ./..., so go vet and go test skip generated code
out=python/streambridge/_native
rm -rf "$gen" && mkdir -p build/bin "$out"
go build -o build/bin/goimports golang.org/x/tools/cmd/goimports
if [ -n "${STREAMBRIDGE_GO_MODULES:-}" ]; then
  cp go.mod build/go.mod.orig && cp go.sum build/go.sum.orig
  trap 'mv build/go.mod.orig go.mod; mv build/go.sum.orig go.sum' EXIT
  for dir in $STREAMBRIDGE_GO_MODULES; do
    dir=$(cd "$dir" && pwd)
    mod=$(cd "$dir" && GOWORK=off go list -m)
    go mod edit -require="$mod@v0.0.0" -replace="$mod=$dir"
  done
fi
PATH="$PWD/build/bin:$PATH" go tool gopy build -vm="${GOPY_PYTHON:-/usr/bin/python3}" \
  -output="$gen" -name=sbnative ./pyshim ${STREAMBRIDGE_GO_PACKAGES:-} >build/gopy.log 2>&1 || { cat build/gopy.log; exit 1; }
"${GOPY_PYTHON:-/usr/bin/python3}" scripts/gopy-fixups.py "$gen" pyshim
cflags=""
for dir in $include; do cflags="$cflags -I$dir"; done
sed -i "s|^#cgo CFLAGS: .*|#cgo CFLAGS:$cflags -Wno-error -Wno-implicit-function-declaration -Wno-int-conversion|; s|^#cgo LDFLAGS: .*|#cgo LDFLAGS: -ldl -lm|" "$gen/sbnative.go"
cp python/native/*.c python/native/*.inc python/native/*.h "$gen/" # the object core (core.c and the parts it includes), built into the same extension
rm -f "$gen"/_sbnative*.so "$gen"/_sbnative*.h
(cd "$gen" && go build -mod=mod -buildmode=c-shared -o "_sbnative$suffix" .)
rm -f "$out"/_sbnative*.so "$out"/*.py
cp "$gen"/*.py "$gen/_sbnative$suffix" "$out/"
rm -f "$out/build.py"
: >"$out/__init__.py"
echo "built $out/_sbnative$suffix"
