#!/usr/bin/env bash
# The test run behind `make test`: every package with -race, verbose into build/test.log;
# printed here are the package results, failures, skips with their reasons, and a count.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
log=build/test.log
go test -race -shuffle=on -count=1 -v "$@" ./... >"$log" 2>&1
rc=$?
grep -E '^(ok|FAIL|panic:)|^\s*--- FAIL|Error Trace:|Error:|\*\*\*' "$log"
grep -E '^\s+[a-z_]+\.go:[0-9]+: SKIP: ' "$log" | sed 's/.*SKIP: //' | sort | uniq -c | sed 's/^ */skipped /; s/ /x: /2'
pass=$(grep -cE '^\s*--- PASS' "$log")
fail=$(grep -cE '^\s*--- FAIL' "$log")
skip=$(grep -cE '^\s*--- SKIP' "$log")
echo "full log: $log; counts are tests and subtests"
echo "tests: $pass passed, $fail failed, $skip skipped"
exit $rc
