#!/usr/bin/env bash
# The package with its native module built for the CPython PYTHON (any build: free-threaded or
# with the GIL, one without a wheel toolchain), in DEST/streambridge, for PYTHONPATH=DEST.
#   bash scripts/package-for.sh PYTHON DEST
set -euo pipefail
cd "$(dirname "$0")/.."
py=$1
dest=$2
inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
suffix=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
STREAMBRIDGE_GO_PACKAGES="${STREAMBRIDGE_GO_PACKAGES-./examples/gokernels}" bash scripts/build-native.sh "$inc" "$suffix"
rm -rf "$dest" && mkdir -p "$dest" && cp -r python/streambridge "$dest/" && rm -f python/streambridge/_native/*"$suffix"
