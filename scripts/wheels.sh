#!/usr/bin/env bash
# One wheel for each CPython given (by default every one on this machine from 3.10 on: the
# system's, pyenv's, the free-threaded 3.13 scripts/free-threaded-python.sh builds, and any
# other it has built), each installed in a fresh virtual environment and smoke-tested there
# (scripts/smoke.py: the import, the README's first program, a host callback, a close race;
# on the software driver).
# A Python older than 3.10 gets one line saying so. Ends with a line per wheel: its file (its
# tags), and the smoke test's answer; exit 1 if any failed.
#   bash scripts/wheels.sh [PYTHON...]
# Each build runs `make wheel PY=...` with a virtual environment of that Python holding
# setuptools and wheel (pinned, from PyPI), made once under build/wheels/.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
pythons=("$@")
if [ ${#pythons[@]} -eq 0 ]; then
  pythons=(/usr/bin/python3)
  for py in "$HOME"/.pyenv/versions/3.*/bin/python3; do [ -x "$py" ] && pythons+=("$py"); done
  ft=$(bash scripts/free-threaded-python.sh) # CI's, built where it is not yet
  pythons+=("$ft")
  while read -r other; do # and any other that script has built (3.14t: free-threaded-python.sh 3.14)
    [ "$other" != "$ft" ] && pythons+=("$other")
  done < <(bash scripts/free-threaded-python.sh --built)
fi
mkdir -p build/wheels
status=0
summary=()
for py in "${pythons[@]}"; do
  ver=$("$py" -V 2>&1)
  if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    summary+=("$py: $ver: streambridge needs CPython 3.10 or newer; skipped")
    continue
  fi
  tag=$(make -s --no-print-directory pytag PY="$py") # the wheel's ABI tag, as the Makefile names it (cp313t)
  builder=build/wheels/$tag-build
  if [ ! -x "$builder/bin/python" ]; then
    "$py" -m venv "$builder" && "$builder/bin/pip" install -q setuptools==75.8.0 wheel==0.45.1 ||
      { summary+=("$py: $ver: FAILED: no build environment"); status=1; continue; }
  fi
  if ! make --no-print-directory wheel PY="$root/$builder/bin/python" >"build/wheels/$tag.log" 2>&1; then
    summary+=("$py: $ver: FAILED: the wheel did not build (build/wheels/$tag.log)")
    status=1
    continue
  fi
  wheel=$(ls dist/streambridge-*-"$tag"-manylinux*.whl | head -1)
  smoke=build/wheels/$tag-smoke
  rm -rf "$smoke" && "$py" -m venv "$smoke" &&
    "$smoke/bin/pip" install -q --no-index --no-deps "$wheel" >>"build/wheels/$tag.log" 2>&1
  if answer=$(cd /tmp && STREAMBRIDGE_DRIVER=sim timeout 120 "$root/$smoke/bin/python" "$root/scripts/smoke.py" "$root/README.md" 2>&1); then
    summary+=("$(basename "$wheel"): ${answer##*$'\n'}")
  else
    summary+=("$(basename "$wheel"): FAILED: $(printf '%s' "$answer" | tail -c 600)")
    status=1
  fi
done
printf '%s\n' "${summary[@]}"
exit $status
