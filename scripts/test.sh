#!/usr/bin/env bash
# The Go half of `make test`: every package with the race detector, in shuffled order,
# through gotestsum (Debian's package): a line per package, each failure with its output,
# and the count; then the skips grouped by reason, a line each (scripts/skips.py: on a
# machine without a GPU the real driver's half of every test skips for the same reason).
# Every event of the run is kept in build/test.json (go test -json).
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
echo "go test -race -shuffle=on ./... (a few minutes: the race detector slows every test)"
gotestsum --format pkgname --hide-summary=skipped --jsonfile build/test.json -- -race -shuffle=on -count=1 "$@" ./...
status=$?
python3 scripts/skips.py build/test.json
# What the runs below answered, a line each, for make test's summary (scripts/summary.py).
: >build/go-more.txt
ran() { if [ "$2" -eq 0 ]; then echo "$1: ok" >>build/go-more.txt; else echo "$1: FAILED" >>build/go-more.txt; status=1; fi; }
ran "every package, race detector, shuffled" "$status"
# Without cgo, as make gpu-build builds the GPU's test binaries and as Go users without a C
# compiler build: purego's stand-in for runtime/cgo is then in use, and internal/cuda binds
# the driver's threads to Go itself (bindm_linux_amd64.go), tested on libc's threads.
echo "CGO_ENABLED=0 go test -shuffle=on ./internal/cuda ./streams ./bridge"
CGO_ENABLED=0 go test -shuffle=on -count=1 ./internal/cuda ./streams ./bridge
ran "without cgo (internal/cuda, streams, bridge)" $?
# The packages that prove handles, again on the software driver's other layouts (other word
# offsets, a level of indirection more, the identity in another block) and on one whose
# layout cannot be learned (STREAMBRIDGE_LAYOUT=unlearnable: the tests that wrap bare
# handles skip there, saying so; everything else must still work), that one with a single
# software device, as a one-GPU machine has (the two-device tests skip, saying so).
# Examples print what a learned layout does, so only the tests run there.
for layout in "STREAMBRIDGE_SIM_LAYOUT=1" "STREAMBRIDGE_SIM_LAYOUT=2" "STREAMBRIDGE_SIM_LAYOUT=3" "STREAMBRIDGE_SIM_LAYOUT=4" \
  "STREAMBRIDGE_LAYOUT=unlearnable STREAMBRIDGE_SIM_DEVICES=1"; do
  echo "go test -shuffle=on ./streams ./bridge with $layout"
  env $layout go test -shuffle=on -count=1 -run '^Test' ./streams ./bridge
  ran "streams and bridge with $layout" $?
done
exit $status
