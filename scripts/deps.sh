#!/usr/bin/env bash
# Installs, from Debian's packages, what the build needs and this machine lacks: gcc and
# make for cgo and -race; gotestsum for the Go tests' summary; Python's headers, pybindgen (which gopy runs), setuptools,
# wheel and pip (which build the wheel from pyproject.toml), venv and pytest for the Python package; mypy for its types; NumPy for its kernel-argument tests; Hypothesis for its property tests of arguments. Needs root where something is missing.
set -euo pipefail
need=()
command -v gcc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
command -v gotestsum >/dev/null || need+=(gotestsum)
for pkg in python3-dev python3-pybindgen python3-pytest python3-setuptools python3-wheel python3-pip python3-venv python3-numpy python3-mypy python3-hypothesis; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0
echo "installing: ${need[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
