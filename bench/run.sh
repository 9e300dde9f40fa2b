#!/usr/bin/env bash
# Runs the Go benchmarks and the C loops on this machine's GPU, side by side, and prints
# the ratios. Needs nvcc (or gcc with cuda.h) and libcuda. Pass a prebuilt test binary
# (make gpu-build makes .device/streams.test) where this machine has no Go.
#   bash bench/run.sh [streams.test]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-}
if [ -n "$bin" ]; then
  bin=$(realpath "$bin")
else
  bin=$(mktemp -d)/streams.test
  CGO_ENABLED=0 go test -c -o "$bin" ./streams
fi
out=${OUT:-$(mktemp -d)}
cc_bin=$out/driver_bench
if command -v nvcc >/dev/null; then
  nvcc -O2 bench/driver_bench.c -lcuda -o "$cc_bin"
else
  cc -O2 -I/usr/local/cuda/include bench/driver_bench.c -L/usr/local/nvidia/lib64 -lcuda -o "$cc_bin"
fi
log=$out/bench.log
: >"$log"
# C and Go take turns, five rounds each, on the same two cores, so that drift in the
# machine's state lands on both; compare.py takes medians.
pin=""
command -v taskset >/dev/null && pin="taskset -c 2,3"
for round in 1 2 3 4 5; do
  $pin "$cc_bin" internal/kernels/kernels.ptx 1 | tee -a "$log"
  $pin "$bin" -test.run='^$' -test.bench=. -test.benchmem -test.count=1 -test.benchtime=1s | tee -a "$log"
done
python3 bench/compare.py "$log"
