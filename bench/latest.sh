#!/usr/bin/env bash
# The table at the top of bench/RESULTS.md from one run on this machine's GPU: the Python
# benchmark beside CuPy, PyTorch and cuda.core, then bench/run.sh (Go beside C), then
# bench/table.py, which rewrites the table in bench/RESULTS.md. The outputs, and the
# rewritten RESULTS.md, are kept in $OUT (or a temporary folder). Where there is no Go, pass
# the prebuilt test binary, as to run.sh (make gpu-build makes .device/streams.test; set
# BENCHSTAT=.device/benchstat too).
# ROUNDS sets the rounds of both (5 Python, 6 Go and C); the whole takes about 12 minutes on
# an H100 with the defaults (4 Python rounds and 6 + 2 Go and C rounds took 570 s), so under a
# 10-minute limit run it with ROUNDS=3 (371 s on a two-H200 host, 390 to 439 s on one H100,
# 2026-11-26).
#   [ROUNDS=N] bash bench/latest.sh [streams.test]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$(mktemp -d)}
python3 bench/python_bench.py --rounds ${ROUNDS:-5} | tee "$out/python_bench.txt"
OUT=$out bash bench/run.sh "$@" | tee "$out/go_vs_c.txt"
machine=${MACHINE:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)}
python3 bench/table.py --python "$out/python_bench.txt" --c "$out/c.txt" --go "$out/go.txt" \
  --machine "${machine:-an unnamed GPU}" --update bench/RESULTS.md
cp bench/RESULTS.md "$out/RESULTS.md"
echo "bench/RESULTS.md rewritten; the outputs are in $out"
