"""The handle proofs' loads run guarded (python/native/proof.inc): memory the driver says
stays mapped can still be unmapped under them by another thread's free() that trims the heap
(a destroyed stream's block at the top), and a fault there must end the loads, not the
process. Every other fault goes on as if the core's handler were not there: to Go's (whose
own checks keep reading by loads), to faulthandler's, or to the default action. Each case
runs in a child: faults are its subject."""

import os
import subprocess
import sys
import textwrap

# A page mapped, written, then unmapped: its address faults on a load.
SETUP = """
import ctypes, mmap, sys
import streambridge as sb
from streambridge import _core
s = sb.Stream(non_blocking=True)
sb.ExternalStream(s.ptr)  # a wrap: the core learns the description and guards its loads
page = mmap.mmap(-1, 4096)
word = ctypes.c_uint64.from_buffer(page)
word.value = 0x5eed
mapped = ctypes.addressof(word)
del word
"""


def _child(code, *flags):
    env = dict(os.environ)
    for setting in ("STREAMBRIDGE_LAYOUT", "STREAMBRIDGE_SIM_LAYOUT"):  # the loads are the subject: a layout to learn
        env.pop(setting, None)
    env.pop("PYTHONFAULTHANDLER", None)  # whether faulthandler comes before the guard is each case's: its flags say
    p = subprocess.run([sys.executable, *flags, "-c", textwrap.dedent(SETUP) + textwrap.dedent(code)],
                       capture_output=True, text=True, timeout=60, env=env)
    return p.returncode, p.stdout, p.stderr


def test_a_fault_in_the_loads_ends_them_and_go_keeps_its_loads():
    rc, out, err = _child("""
        import signal
        print("mapped", hex(_core.load_word(mapped)))
        page.close()
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        print("unmapped", _core.load_word(mapped))
        print("mask kept", signal.pthread_sigmask(signal.SIG_BLOCK, []) == mask)
        print("reads", _core.validation_reads())
        try:
            sb.ExternalStream(mapped)  # the Go check reads it by loads, under the core's handler
        except sb.InvalidHandleError as e:
            print("refused", "not a live CUDA stream" in str(e) or "is not" in str(e))
    """)
    assert rc == 0, err
    assert out.splitlines() == ["mapped 0x5eed", "unmapped None", "mask kept True", "reads loads", "refused True"], \
        out + err


def test_with_faulthandler_enabled_after_the_guard_a_fault_in_the_loads_still_ends_them():
    # Go's checks read by process_vm_readv while faulthandler's handler is in front. A fault
    # in the loads reaches faulthandler first: it reports it (as fatal: it cannot know
    # better), steps aside (its handler is no longer installed) and raises it again; the
    # core's handler, in front again, ends the loads, and the process goes on.
    rc, out, err = _child("""
        import faulthandler
        faulthandler.enable()
        print("reads", _core.validation_reads())
        page.close()
        print("unmapped", _core.load_word(mapped))
        print("then reads", _core.validation_reads())
    """)
    assert rc == 0, err
    assert out.splitlines() == ["reads process_vm_readv", "unmapped None", "then reads loads"], out + err
    assert "Fatal Python error: Segmentation fault" in err, err


def test_any_other_fault_goes_on_to_the_handler_before():
    # A fault outside the loads is not the core's to take: with faulthandler enabled before
    # streambridge was imported (-X faulthandler, as pytest does), it reaches faulthandler
    # (through Go's) and the process dies of it; without, the default action ends it.
    crash = "page.close()\nctypes.string_at(mapped, 8)\nprint('survived')\n"
    rc, out, err = _child(crash, "-X", "faulthandler")
    assert rc != 0 and "survived" not in out, out + err
    assert "Fatal Python error: Segmentation fault" in err, err
    rc, out, err = _child(crash)
    assert rc == -11 and "survived" not in out, (rc, out, err)
