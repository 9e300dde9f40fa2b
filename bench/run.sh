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
# The same loops as a library the Go benchmarks load and run inside their own process
# (BenchmarkInProcessC), where the host and the driver are in the state Go's loops meet.
export STREAMBRIDGE_INPROC_C=$out/inproc.so
if command -v nvcc >/dev/null; then
  nvcc -O2 bench/driver_bench.c -lcuda -lpthread -o "$cc_bin"
  nvcc -O2 -shared -Xcompiler -fPIC bench/inproc.c -lcuda -o "$STREAMBRIDGE_INPROC_C"
else
  cc -O2 -I/usr/local/cuda/include bench/driver_bench.c -L/usr/local/nvidia/lib64 -lcuda -lpthread -o "$cc_bin"
  cc -O2 -shared -fPIC -I/usr/local/cuda/include bench/inproc.c -L/usr/local/nvidia/lib64 -lcuda -o "$STREAMBRIDGE_INPROC_C"
fi
# C and Go take turns, ROUNDS rounds each (6: benchstat wants six samples for an interval), on the same two cores, so that drift in the
# machine's state lands on both. benchstat (a Go tool of this module; pass BENCHSTAT=path to
# a prebuilt one where there is no Go, as make gpu-build makes .device/benchstat) prints the
# medians with their confidence intervals, and Go's change against C with its p-value.
# Go's WaitStream is the same two driver calls as C's RecordWait, in one crossing; the Raw
# and NoContext variants have no C row.
pin=""
command -v taskset >/dev/null && pin="taskset -c 2,3"
: >"$out/c.txt"
: >"$out/go.txt"
rounds=${ROUNDS:-6}
for round in $(seq "$rounds"); do
  echo "round $round of $rounds: C, then Go" >&2
  $pin "$cc_bin" internal/kernels/kernels.ptx 1 | sed 's|^BenchmarkC/|Benchmark|' >>"$out/c.txt"
  $pin "$bin" -test.run='^$' -test.bench=. -test.skip=Throughput -test.benchmem -test.count=1 -test.benchtime=1s |
    sed -E 's/^(Benchmark[A-Za-z/]+)-[0-9]+/\1/' >>"$out/go.txt"
done
# Throughput from 1 to 16 goroutines beside as many C threads (issue 29), not pinned: the
# machine's cores are what many threads share. Six rounds each, taking turns.
for round in $(seq "$rounds"); do
  echo "throughput round $round of $rounds: C threads, then Go goroutines" >&2
  "$cc_bin" internal/kernels/kernels.ptx 1 threads | sed 's|^BenchmarkC/|Benchmark|' >>"$out/c.txt"
  "$bin" -test.run='^$' -test.bench=Throughput -test.benchmem -test.count=1 -test.benchtime=2000000x |
    sed -E 's/^(Benchmark[A-Za-z/]+=[0-9]+)-[0-9]+/\1/' >>"$out/go.txt"
done
wait_stream=$(sed -n 's|^BenchmarkRecordWait\b|BenchmarkWaitStream|p' "$out/c.txt")
echo "$wait_stream" >>"$out/c.txt"
# The C loops Go loaded into its own process (BenchmarkInProcessC, …CThroughput) are rows of their own.
grep -v '^BenchmarkInProcessC' "$out/go.txt" >"$out/go-own.txt"
${BENCHSTAT:-go tool benchstat} -ignore goos,goarch,pkg,cpu C="$out/c.txt" Go="$out/go-own.txt"
# C's ns/op, and Go's in the same turns (go-ns/op: BenchmarkInProcessC, and …CThroughput's
# goroutines taking turns with C's threads).
awk -v cf="$out/c-in-go.txt" -v gf="$out/go-beside-c.txt" '/^BenchmarkInProcessC/ {
    name = $1; sub(/^BenchmarkInProcessC[A-Za-z]*\//, "Benchmark", name); c = ""; g = ""
    for (i = 3; i <= NF; i++) { if ($i == "ns/op") c = $(i - 1); if ($i == "go-ns/op") g = $(i - 1) }
    printf "%s\t%s\t%s ns/op\n", name, $2, c > cf
    if (g != "") printf "%s\t%s\t%s ns/op\n", name, $2, g > gf
  }' "$out/go.txt"
if [ -s "$out/c-in-go.txt" ]; then
  echo "Go against the same loops in C inside the Go benchmark's own process, the same rounds:"
  ${BENCHSTAT:-go tool benchstat} -ignore goos,goarch,pkg,cpu "C in Go's process=$out/c-in-go.txt" Go="$out/go-beside-c.txt"
fi
echo "bars, as Go's change against C (+30% is a ratio of 1.3): RecordWait, WaitStream, Query <= +30%;" \
  "LaunchEmpty <= +10%; HostFuncLatency <= +20%; issue 29's: every one, throughput at every count too, <= +10%"
