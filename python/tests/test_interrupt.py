"""Ctrl-C during a wait: on the main thread, a stream's or an event's synchronize() ends
with KeyboardInterrupt while the work goes on, and the objects stay usable. Each case runs
in a child process, which the test sends SIGINT, as a terminal does."""

import os
import subprocess
import sys

import pytest

CHILD = r"""
import os, signal, sys, threading, time
import streambridge as sb

what = sys.argv[1]
s = sb.Stream(non_blocking=True)
gate = threading.Event()
s.launch_host_func(lambda _: gate.wait(10), None)  # the stream's work: until the gate opens
e = s.record()
threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
t0 = time.monotonic()
try:
    (s.synchronize if what == "stream" else e.synchronize)()
    print("returned")
except KeyboardInterrupt:
    print(f"interrupted {time.monotonic() - t0 - 0.3:.3f} s after the signal")
print("work still going:", not s.query() and not e.query())
gate.set()
s.synchronize()
e.synchronize()
print("done after:", s.query() and e.query())
s.close()
"""


@pytest.mark.parametrize("what", ["stream", "event"])
def test_ctrl_c_ends_a_synchronize(what):
    out = subprocess.run([sys.executable, "-c", CHILD, what], env=dict(os.environ), capture_output=True,
                         text=True, timeout=60)
    print(out.stdout, out.stderr)  # the latency, for the record (pytest -s)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("interrupted"), "the wait ended by the signal, not by the work (10 s)"
    assert lines[1:] == ["work still going: True", "done after: True"]


def test_a_synchronize_on_another_thread_waits_for_the_work():
    """Off the main thread, where no signal handler runs, the wait polls as on the main
    thread (queries under the capture lock), and returns once the work is done."""
    import threading

    import streambridge as sb

    s = sb.Stream(non_blocking=True)
    gate = threading.Event()
    ran = []
    s.launch_host_func(lambda _: (gate.wait(5), ran.append(1)), None)
    e = s.record()
    waited = []
    t = threading.Thread(target=lambda: (s.synchronize(), e.synchronize(), waited.append(list(ran))))
    t.start()
    t.join(0.2)
    assert t.is_alive(), "the wait goes on while the work does"
    gate.set()
    t.join(10)
    assert waited == [[1]], "it returned once the work was done"
