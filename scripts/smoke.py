"""A wheel's smoke test, run by scripts/wheels.sh in a fresh virtual environment where only that
wheel is installed, from outside the clone (so the installed package is the one imported), on
the software driver: the import (and, on a free-threaded CPython, that it left the GIL off),
the README's first program, one host callback, and one close racing calls on other threads.
Prints one line; exits non-zero on the first thing that fails.

    STREAMBRIDGE_DRIVER=sim python smoke.py README.md
"""

import os
import subprocess
import sys
import sysconfig
import threading

import streambridge as sb

free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
gil = getattr(sys, "_is_gil_enabled", lambda: True)()
assert not (free_threaded and gil), "importing streambridge turned the GIL on"
source = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "python", "streambridge")
assert not os.path.abspath(sb.__file__).startswith(source + os.sep), f"the clone's source, not the installed package: {sb.__file__}"

# The README's first program, as test_readme.py runs it (python/tests/readme_program.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "python", "tests"))
import readme_program  # noqa: E402

first = readme_program.python_blocks(open(sys.argv[1]).read())[0]
ran = subprocess.run([sys.executable, "-c", first], capture_output=True, text=True, timeout=60)
assert ran.returncode == 0 and ran.stdout == readme_program.FIRST_OUTPUT, ran.stdout + ran.stderr

# One host callback.
s = sb.Stream(non_blocking=True)
called = threading.Event()
s.launch_host_func(lambda _: called.set(), None)
s.synchronize()
assert called.wait(10), "the host callback never ran"

# One close racing calls on other threads: each call answers or raises streambridge's error.
before = sb._core.live_streams()
victim, untyped = sb.Stream(non_blocking=True), []


def calls():
    for _ in range(2000):
        try:
            victim.query()
            victim.launch_host_func(lambda _: None, None)
        except sb.ClosedError:
            pass
        except Exception as e:  # none of streambridge's
            untyped.append(e)


threads = [threading.Thread(target=calls) for _ in range(4)]
for t in threads:
    t.start()
victim.close()
for t in threads:
    t.join()
s.close()
assert not untyped, untyped
assert sb._core.live_streams() == before - 1, (sb._core.live_streams(), before)
print(f"smoke: Python {sys.version.split()[0]}{' free-threaded, GIL off' if free_threaded else ''}: import, the "
      f"README's first program, a host callback, a close racing 4 threads: all passed ({sb.__file__})")
