"""The software driver lays its objects out in more than one way (STREAMBRIDGE_SIM_LAYOUT),
so that the C core's handle proofs are seen to read the words the driver describes, never
fixed ones: the suites of borrowed streams and events, and of hostile handles, run again on
each other layout, in a child pytest."""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SUITES = ["test_external_stream.py", "test_foreign_events.py", "test_safety.py"]


@pytest.mark.parametrize("layout", ["1", "2"])
def test_the_handle_proofs_on_another_layout(driver_name, layout):
    if driver_name != "sim":
        pytest.skip("SKIP: the software driver's layouts; the real driver has its own, learned")
    env = dict(os.environ, STREAMBRIDGE_SIM_LAYOUT=layout)
    env.pop("STREAMBRIDGE_LAYOUT", None)  # the proofs are what these layouts are for
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          *(os.path.join(HERE, f) for f in SUITES)],
                         env=env, capture_output=True, text=True, timeout=600, cwd=HERE)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " passed" in out.stdout.splitlines()[-1]


def test_a_bad_sim_layout_is_named(driver_name):
    if driver_name != "sim":
        pytest.skip("SKIP: a setting of the software driver")
    child = "import streambridge as sb\ntry:\n    sb.Stream()\nexcept ValueError as e:\n    print(e)\n"
    env = dict(os.environ, STREAMBRIDGE_SIM_LAYOUT="7")
    out = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert 'STREAMBRIDGE_SIM_LAYOUT="7": want a layout from 0 to 2' in out.stdout, out.stdout
