#!/usr/bin/env bash
# The Go half of `make test`: every package with the race detector, in shuffled order,
# through gotestsum (Debian's package): a line per package, then each skipped test with its
# reason ("SKIP: ..."), each failure with its output, and the count. Every event of the run
# is kept in build/test.json (go test -json).
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
echo "go test -race -shuffle=on ./... (a few minutes: the race detector slows every test)"
exec gotestsum --format pkgname --jsonfile build/test.json -- -race -shuffle=on -count=1 "$@" ./...
