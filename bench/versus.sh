#!/usr/bin/env bash
# Two builds of the Go benchmarks against each other on this machine's GPU: the "before and
# after, same machine, same run" that a change's cost is judged by (issue 25's guards). The
# builds take turns, ROUNDS rounds (6: benchstat wants six samples for an interval), pinned to
# the two cores bench/run.sh uses; benchstat prints each row's change with its p-value. The
# Layer rows are the streams layer alone (no GPU time), the Raw rows the driver alone.
#   bash bench/versus.sh BASE.test NEW.test [benchmark regexp]
set -euo pipefail
cd "$(dirname "$0")/.."
base=$(realpath "$1") new=$(realpath "$2")
pattern=${3:-'^Benchmark(Query|RecordWait|RecordWaitRaw|EventCreateClose|LaunchEmpty|LayerRecordWait|LayerQuery)$'}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
pin=""
command -v taskset >/dev/null && [ "$(nproc)" -ge 4 ] && pin="taskset -c 2,3"
: >"$out/base.txt"
: >"$out/new.txt"
rounds=${ROUNDS:-6}
for round in $(seq "$rounds"); do
  order="base new"
  [ $((round % 2)) -eq 0 ] && order="new base"
  for arm in $order; do
    bin=$base
    [ "$arm" = new ] && bin=$new
    (cd streams && $pin "$bin" -test.run='^$' -test.bench="$pattern" -test.benchmem -test.count=1 -test.benchtime=1s) |
      grep '^Benchmark' | sed -E 's/^(Benchmark[A-Za-z]+)-[0-9]+/\1/' >>"$out/$arm.txt"
  done
done
${BENCHSTAT:-go tool benchstat} -ignore goos,goarch,pkg,cpu base="$out/base.txt" new="$out/new.txt"
