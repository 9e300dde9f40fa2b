#!/usr/bin/env bash
# On a GPU machine without Go: run the test binaries `make gpu-build` put in .device/ with
# STREAMBRIDGE_REQUIRE_GPU=1 (a skip of the real driver is a failure), then the demo.
# Full logs go to $OUT (or a temporary folder); a summary is printed.
#   bash scripts/gpu-check.sh [extra test flags]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$(mktemp -d)}
status=0
# collect JOB NAME: waits for a run started in the background, which wrote its exit status to
# $out/NAME.rc and its output to $out/NAME.log; sets rc and log, and status on a failure.
collect() { wait "$1"; rc=$(cat "$out/$2.rc"); log=$out/$2.log; [ "$rc" -eq 0 ] || status=1; }
# Cubin and fatbin images of the test kernels, for TestLoadCubinAndFatbin.
images=$out/images
mkdir -p "$images"
if command -v nvcc >/dev/null; then
  nvcc -cubin -arch=sm_90 -o "$images/kernels.cubin" "$root/internal/kernels/kernels.ptx" &&
    nvcc -fatbin -arch=sm_90 -o "$images/kernels.fatbin" "$root/internal/kernels/kernels.ptx" &&
    export STREAMBRIDGE_TEST_IMAGES=$images
fi
for path in "$root"/.device/*.test; do
  [ -x "$path" ] || continue
  bin=$(basename "$path")
  log=$out/${bin%.test}.log
  (cd "$root/streams" && STREAMBRIDGE_REQUIRE_GPU=1 timeout 300 "$root/.device/$bin" \
    -test.v -test.count=1 -test.timeout=280s "$@" >"$log" 2>&1)
  rc=$?
  [ $rc -eq 0 ] || status=1
  echo "== $bin: exit $rc; top-level $(grep -c '^--- PASS' "$log") passed, $(grep -c '^--- FAIL' "$log") failed, $(grep -c '^--- SKIP' "$log") skipped; subtests $(grep -c '^    --- PASS' "$log") passed, $(grep -c '^    --- FAIL' "$log") failed, $(grep -c '^    --- SKIP' "$log") skipped"
  grep -E "^\s*--- (FAIL|SKIP)|SKIP:|Error:|device [0-9]+:" "$log" | sort | uniq | head -40
done
# The real driver taken as one whose stream layout cannot be learned (docs/testing.md): the
# Go tests (examples print what a learned layout does), beside the Python tests below.
(cd "$root/streams" && STREAMBRIDGE_REQUIRE_GPU=1 STREAMBRIDGE_LAYOUT=unlearnable timeout 300 "$root/.device/streams.test" \
  -test.run='^Test' -test.v -test.count=1 -test.shuffle=on >"$out/streams-unlearnable.log" 2>&1; echo $? >"$out/streams-unlearnable.rc") &
go_unlearnable=$!
# The wheel `make gpu-build` built for this machine's CPython 3.12 (make wheel-cp312), installed with no
# network, then the Python tests and the cross-framework tests on the real driver.
wheel=$(ls "$root"/.device/streambridge-*-cp312-*.whl 2>/dev/null | head -1)
if [ -n "$wheel" ]; then
  site=$(mktemp -d)
  python3 -m pip install -q --no-deps --no-index --target "$site" "$wheel"
  # The software driver's run needs no GPU: it goes on beside the real driver's.
  (cd "$out" && PYTHONPATH="$site" STREAMBRIDGE_DRIVER=sim timeout 300 python3 -m pytest -q -rfEs -p no:cacheprovider \
    "$root/python/tests" >"$out/pytest-sim.log" 2>&1; echo $? >"$out/pytest-sim.rc") &
  sim=$!
  # And the real driver taken as one whose stream layout cannot be learned (docs/testing.md).
  (cd "$out" && PYTHONPATH="$site" STREAMBRIDGE_REQUIRE_GPU=1 STREAMBRIDGE_LAYOUT=unlearnable timeout 300 python3 -m pytest -q \
    -rfEs -p no:cacheprovider "$root/python/tests" >"$out/pytest-unlearnable.log" 2>&1; echo $? >"$out/pytest-unlearnable.rc") &
  unlearnable=$!
  log=$out/pytest.log
  (cd "$out" && PYTHONPATH="$site" STREAMBRIDGE_REQUIRE_GPU=1 STREAMBRIDGE_REPORT="$out/hostile.txt" timeout 420 \
    python3 -m pytest -q -rfEs -p no:cacheprovider "$root/python/tests" "$root/interop_test" >"$log" 2>&1)
  rc=$?
  [ $rc -eq 0 ] || status=1
  echo "== pytest (wheel, real driver): exit $rc: $(grep -E '(passed|failed|error).* in [0-9.]+s' "$log" | tail -1)"
  grep -E "^(FAILED|ERROR)|SKIPPED" "$log" | head -30
  grep -E "^E  " "$log" | head -10
  cat "$out/hostile.txt" 2>/dev/null
  collect $sim pytest-sim
  echo "== pytest python/tests on the software driver, same machine: exit $rc: $(tail -1 "$log")"
  grep -E "FAILED|ERROR" "$log" | head -20
  collect $unlearnable pytest-unlearnable
  echo "== pytest python/tests, real driver, STREAMBRIDGE_LAYOUT=unlearnable: exit $rc: $(tail -1 "$log")"
  grep -E "FAILED|ERROR" "$log" | head -20
fi
collect $go_unlearnable streams-unlearnable
echo "== streams.test, STREAMBRIDGE_LAYOUT=unlearnable: exit $rc; top-level $(grep -c '^--- PASS' "$log") passed, $(grep -c '^--- FAIL' "$log") failed, $(grep -c '^--- SKIP' "$log") skipped"
grep -E "^\s*--- FAIL" "$log" | head -20
if [ -x "$root/.device/demo" ]; then
  echo "== demo"
  (cd "$root" && timeout 120 .device/demo) || status=1
fi
if [ -n "$wheel" ]; then
  echo "== examples/pipeline.py (torch -> NVRTC kernel -> CuPy)"
  (cd "$root" && PYTHONPATH="$site" timeout 120 python3 examples/pipeline.py) || status=1
fi
exit $status
