#!/usr/bin/env bash
# make test: every stage, each run even where one before it failed (but for deps, which the
# others need), then one summary of what ran, its counts and the verdict
# (scripts/summary.py). The exit status is 0 only where every stage passed.
set -uo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}
results=()
status=0
rm -f build/test.json build/go-more.txt build/pytest-sim.xml build/pytest-unlearnable.xml build/pytest-jax.xml
for stage in deps check go-test typecheck pytest pytest-jax docs; do
  start=$SECONDS
  $make --no-print-directory "$stage"
  rc=$?
  results+=("$stage:$rc:$((SECONDS - start))")
  [ $rc -eq 0 ] || status=1
  [ "$stage" = deps ] && [ $rc -ne 0 ] && break
done
python3 scripts/summary.py "${results[@]}"
exit $status
