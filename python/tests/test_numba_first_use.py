"""The first conversion to Numba in a process runs alone. Numba makes its device list on first
use without a lock: of eight threads making their first conversions at once, two or three
raised inside numba-cuda on an H200 (interop_test/test_conversions.py, the real one). Here a
stand-in for Numba whose device list, made on first use, raises when a second thread starts
making it before the first is done, as numba-cuda's did: the software driver, no Numba."""

import subprocess
import sys

CHILD = r"""
import sys, threading, time, types
import streambridge as sb

class Gpus:  # numba.cuda.gpus: the device list, made on first use, unlocked
    made, making = None, 0
    def __getitem__(self, device):
        if Gpus.made is None:
            Gpus.making += 1
            if Gpus.making > 1:
                raise AssertionError("key already in dictionary: 0")  # numba-cuda's, on the H200
            time.sleep(0.05)  # long enough for the other threads to arrive
            Gpus.made = [Device()]
        return Gpus.made[device]

class Device:  # `with cuda.gpus[n]:`
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return False

class External:  # cuda.external_stream(ptr)
    def __init__(self, ptr):
        self.ptr = ptr

cuda = types.ModuleType("numba.cuda")
cuda.gpus, cuda.external_stream = Gpus(), External
numba = types.ModuleType("numba")
numba.cuda = cuda
sys.modules.update({"numba": numba, "numba.cuda": cuda})

streams = [sb.Stream(non_blocking=True) for _ in range(8)]
start = threading.Barrier(8)
got = []

def first(s):
    start.wait()
    try:
        got.append(s.to_numba().ptr == s.ptr)
    except Exception as e:
        got.append(repr(e))

threads = [threading.Thread(target=first, args=(s,)) for s in streams]
for t in threads:
    t.start()
for t in threads:
    t.join(30)
print(got.count(True), [g for g in got if g is not True])
"""


def test_first_conversions_to_numba_on_eight_threads_at_once_all_succeed():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split("\n")[0] == "8 []", out.stdout + out.stderr[-2000:]
