#!/usr/bin/env bash
# Where a Python hot loop's time goes on this machine's GPU: each loop of bench/hot_loops.py
# alone in a process, sampled by py-spy (native stacks; the GPU machine has no perf), then
# bench/where.py: the driver's share, the interpreter's and streambridge's C core's. Needs
# the wheel installed and py-spy: PYSPY=path, or py-spy on PATH, or .device/py-spy.gz (make
# gpu-build puts it there).
#   [N=3000000] bash bench/profile.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$(mktemp -d)}
spy=${PYSPY:-$(command -v py-spy || true)}
if [ -z "$spy" ] && [ -f .device/py-spy.gz ]; then
  spy=$(mktemp -d)/py-spy && gunzip -c .device/py-spy.gz >"$spy" && chmod +x "$spy"
fi
[ -n "$spy" ] || { echo "no py-spy: set PYSPY, or make gpu-build (it puts one in .device)" >&2; exit 1; }
pin=""
command -v taskset >/dev/null && pin="taskset -c 2,3"
loops=$(python3 bench/hot_loops.py --list) # each loop hot_loops.py has
for loop in $loops; do
  $pin "$spy" record --native -r 2000 -f raw -o "$out/$loop.txt" -- python3 bench/hot_loops.py "$loop" "${N:-3000000}" >/dev/null 2>&1
  python3 bench/where.py "$out/$loop.txt"
done
