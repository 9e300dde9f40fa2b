#!/usr/bin/env bash
# On a GPU machine without a free-threaded CPython: the one `make gpu-build-ft` packed into
# .device-ft/ (its interpreter and the package built for it), unpacked to a temporary
# folder, then, with the GIL off as imported (the module declares it needs none; the import
# fails if it turned the GIL on): the Python suite on the real driver, the chaos soak for
# DURATION per seed, the seeds at once, then the benchmark's thread rows (bench/threads_bench.py:
# record+wait, the pair as one call, queries, launches)
# and, where the same CPython built with the GIL is packed too (make gpu-build-ft GIL_TWIN=1),
# one thread on each in turn (on CPU 2), ROUNDS times (4 unless set), then where one thread's pair goes
# on each (bench/call_parts.py: its calls, the core's subclass and bare-extension columns),
# twice in turn; the benchmark's threads pinned
# (--pin: a row of k threads on the first k CPUs of the list, Python's and C's alike, CPU 2 first). Logs under $OUT (or a temporary
# folder); a line each.
#   bash scripts/gpu-ft.sh DURATION SEED...
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$(mktemp -d)}
duration=$1
shift
ft=$(mktemp -d)
tar -xJf "$root/.device-ft/python.tar.xz" -C "$ft" || exit 1
py=$(ls "$ft"/bin/python3.*t) # the one interpreter packed (make gpu-build-ft FT_VERSION=...)
export PYTHONPATH=$ft
unset PYTHON_GIL
status=0
(cd "$out" && $py -W error::RuntimeWarning -c 'import sys, streambridge as sb
assert not sys._is_gil_enabled(), "importing streambridge turned the GIL on"
print(sys.version.split()[0], "GIL enabled:", sys._is_gil_enabled(), "driver:", sb.driver())') || status=1
(cd "$(mktemp -d)" && STREAMBRIDGE_REQUIRE_GPU=1 timeout 400 $py -m pytest -q -rfEs -p no:cacheprovider "$root/python/tests" \
  >"$out/pytest-ft.log" 2>&1) # in a folder of its own: Hypothesis leaves its .hypothesis where it runs
rc=$?
[ $rc -eq 0 ] || status=1
echo "== pytest python/tests, real driver, free-threaded, GIL off: exit $rc: $(tail -1 "$out/pytest-ft.log")"
grep -E "^(FAILED|ERROR)" "$out/pytest-ft.log" | head -20
pids=()
for seed in "$@"; do
  (timeout "$(( ${duration%.*} + 90 ))" $py "$root/python/tests/test_chaos.py" --soak "$duration" "$seed" \
    >"$out/chaos-ft-$seed.log" 2>&1; echo $? >"$out/chaos-ft-$seed.rc") &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for seed in "$@"; do
  rc=$(cat "$out/chaos-ft-$seed.rc")
  [ "$rc" -eq 0 ] || status=1
  echo "chaos soak, free-threaded, GIL off, seed $seed: exit $rc; $(grep -m1 -E 'chaos soak:|Fatal|Error|hang' "$out/chaos-ft-$seed.log")"
done
# The rows' CPUs, the first two last: a row of k threads runs on the first k, so that one thread
# runs on CPU 2, not on CPU 0, where the machine's own work lands (its C and Python pairs swung
# between a fast and a slow mode there), and 16 threads on all of them.
cpus=$($py -c 'import os; c = sorted(os.sched_getaffinity(0)); print(*(c[2:] + c[:2]))')
for call in record-wait wait-stream query launch; do # each a row set: the calls that take no shared lock
  (cd "$root" && timeout 300 $py bench/threads_bench.py --call $call --rounds 3 --pin $cpus >"$out/threads-bench-ft-$call.log" 2>&1) ||
    status=1
  echo "== bench/threads_bench.py --call $call, free-threaded, GIL off:"
  tail -7 "$out/threads-bench-ft-$call.log"
done
if [ -f "$root/.device-ft/python-gil.tar.xz" ]; then
  gil=$(mktemp -d)
  tar -xJf "$root/.device-ft/python-gil.tar.xz" -C "$gil" || exit 1
  gpy=$(ls "$gil"/bin/python3.* | grep -v 't$')
  echo "== one thread on CPU 2, taking turns: the free-threaded build (GIL off), then $(basename "$gpy") (the same CPython with the GIL)"
  one() { # PYTHON PYTHONPATH: its one-thread row
    (cd "$root" && PYTHONPATH=$2 timeout 120 "$1" bench/threads_bench.py --threads 1 --rounds 5 --n 400000 --pin 2 \
      >"$out/threads-bench-one.log" 2>&1) || status=1
    echo "$(basename "$1"): $(grep '^| 1 |' "$out/threads-bench-one.log")"
  }
  for _ in $(seq "${ROUNDS:-4}"); do
    one "$py" "$ft"
    one "$gpy" "$gil"
  done
  echo "== where one thread's pair goes (bench/call_parts.py --cpu 2 --rounds 5: one CPU, not the first, where the machine's own work lands), each build in turn, over C's pair"
  parts() { # PYTHON PYTHONPATH: its medians row
    (cd "$root" && PYTHONPATH=$2 timeout 120 "$1" bench/call_parts.py --cpu 2 --rounds 5 >"$out/call-parts.log" 2>&1) || status=1
    grep -m1 '^| record_wait' "$out/call-parts.log" | sed "s/^/$(basename "$1") columns: /"
    echo "$(basename "$1"): $(tail -1 "$out/call-parts.log")"
  }
  for _ in 1 2; do
    parts "$py" "$ft"
    parts "$gpy" "$gil"
  done
fi
exit $status
