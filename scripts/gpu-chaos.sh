#!/usr/bin/env bash
# The Go chaos soak (streams/chaos_test.go) on a GPU machine without Go, from the test binary
# `make gpu-build` put in .device/: each seed for DURATION on the real driver, with
# STREAMBRIDGE_REQUIRE_GPU=1, a log each under $OUT (or a temporary folder), and a line each:
# its exit, calls made, and the first crash or failure.
#   bash scripts/gpu-chaos.sh DURATION SEED... [-- CALLS]
# CALLS is STREAMBRIDGE_CHAOS_CALLS, a regular expression of the calls to make (all by default).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$(mktemp -d)}
duration=$1
shift
seeds=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do seeds+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
calls=${1:-}
status=0
for seed in "${seeds[@]}"; do
  log=$out/chaos-$seed${calls:+-$(echo "$calls" | tr -c 'A-Za-z0-9' '_' | cut -c1-40)}.log
  (cd "$root/streams" && STREAMBRIDGE_REQUIRE_GPU=1 STREAMBRIDGE_CHAOS=$duration STREAMBRIDGE_CHAOS_SEED=$seed \
    STREAMBRIDGE_CHAOS_CALLS=$calls timeout "$(( $(echo "$duration" | tr -dc 0-9) + 60 ))" "$root/.device/streams.test" -test.run '^TestChaosSoak$/cuda' \
    -test.v -test.count=1 >"$log" 2>&1)
  rc=$?
  [ $rc -eq 0 ] || status=1
  made=$(grep -oE '[0-9]+ calls \([0-9]+ host function panics' "$log" | head -1)
  first=$(grep -m1 -E 'SIGSEGV|fatal error|panic:|Error:|hang' "$log")
  frames=$(grep -A30 -m1 -E 'SIGSEGV|hang' "$log" | grep -oE 'streams\.\(\*[A-Za-z]+\)\.[A-Za-z]+' | head -3 | tr '\n' ' ')
  echo "seed $seed${calls:+ calls /$calls/}: exit $rc; ${made:-no count}; ${first:-clean} $frames"
done
exit $status
