"""A stream or event another thread made has its driver objects in that thread's glibc arena,
not in the brk heap; the proofs' loads go there too, in an arena's first heap, which glibc
never unmaps (python/native/proof.inc, "Other threads' heaps"), so such a borrowed stream's
every use costs a few loads, not the Go check. Only what /proc/self/maps shows private and
anonymous, and shaped as a first heap, is taken for one."""

import ctypes
import mmap
import os
import tempfile
import threading

import pytest

import streambridge as sb
from streambridge import _core

HEAP = 64 << 20  # glibc's HEAP_MAX_SIZE on 64-bit
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.sbrk.restype = ctypes.c_void_p
libc.sbrk.argtypes = [ctypes.c_long]


def on_a_thread(fn):
    got = []
    t = threading.Thread(target=lambda: got.append(fn()))
    t.start()
    t.join()
    return got[0]


def test_what_other_threads_malloced_lies_in_arenas_first_heaps():
    if os.environ.get("MALLOC_ARENA_MAX") == "1" or "arena_max=1" in os.environ.get("GLIBC_TUNABLES", ""):
        pytest.skip("SKIP: glibc is told to keep one arena here: no thread has an arena of its own")
    # four threads at once, each with an arena while glibc has arenas to give (a thread may
    # also be handed one another thread used, the brk heap's among them)
    meet = threading.Barrier(4)
    got = []

    def take():
        got.append(libc.malloc(64))
        meet.wait()

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        above = [p for p in got if p > libc.sbrk(0)]
        assert above, "some thread's malloc comes from an arena of its own, above the break"
        for p in above:
            assert _core.arena_heap(p) == p & ~(HEAP - 1)
            assert _core.arena_heap(p + 4096) == p & ~(HEAP - 1)  # anywhere in that heap
    finally:
        for p in got:
            libc.free(p)


def test_the_brk_heap_and_other_memory_are_not_taken_for_an_arena():
    # the brk heap, as the kernel names it ([heap] in /proc/self/maps): its bounds are the
    # description's own (id(None), the interpreter's data, was taken for an address there,
    # below the break, which it is only where the interpreter is linked statically: not in
    # pyenv's, built with --enable-shared)
    with open("/proc/self/maps") as maps:
        brk = [[int(a, 16) for a in line.split()[0].split("-")] for line in maps if line.rstrip().endswith("[heap]")]
    assert len(brk) == 1, "the process has one brk heap"
    (start, end), = brk
    for address in (start + 64, (start + end) // 2 & ~7, end - 64):
        assert _core.arena_heap(address) is None, hex(address)
    # anonymous memory, 64 MB aligned, that is no heap: its first words are no heap_info
    region = mmap.mmap(-1, 3 * HEAP)
    start = ctypes.addressof(ctypes.c_char.from_buffer(region))
    base = (start + HEAP - 1) & ~(HEAP - 1)
    assert _core.arena_heap(base + 64) is None
    # nor with a first heap's words in it, where its sizes are no whole pages
    words = (ctypes.c_uint64 * 4).from_address(base + HEAP)
    words[0], words[1], words[2], words[3] = base + HEAP + 32, 0, 5000, 5000
    assert _core.arena_heap(base + HEAP + 64) is None
    del words
    # a file's mapping is never one, even with a first heap's words at its start
    with tempfile.TemporaryFile() as f:
        f.truncate(3 * HEAP)
        mapped = mmap.mmap(f.fileno(), 3 * HEAP)
        start = ctypes.addressof(ctypes.c_char.from_buffer(mapped))
        base = (start + HEAP - 1) & ~(HEAP - 1)
        words = (ctypes.c_uint64 * 4).from_address(base)
        words[0], words[1], words[2], words[3] = base + 32, 0, 1 << 20, 1 << 20  # ar_ptr, prev, size, mprotect_size
        assert _core.arena_heap(base + 64) is None
        del words
        mapped.close()
    # memory nobody mapped
    assert _core.arena_heap(1 << 46) is None


@pytest.mark.learned_layout
def test_a_stream_and_an_event_another_thread_made_are_proven_by_loads():
    owner = on_a_thread(lambda: sb.Stream(non_blocking=True))
    # three events, the middle one borrowed: a live event is proven by its neighbours in its
    # context's list, and both of its are this thread's. (The event made before the first
    # may be another library's, in a heap the loads do not reach: with JAX initialized on
    # the GPU, an XLA event is. Such an event is proven by the Go check instead.)
    first, event, neighbour = on_a_thread(lambda: tuple(sb.Event(disable_timing=True) for _ in range(3)))
    borrowed = sb.ExternalStream(owner.ptr)
    borrowed_event = sb.Event.from_handle(event.ptr)
    borrowed.record(borrowed_event)
    before = _core.proofs()
    for _ in range(10):
        borrowed.query()
        borrowed_event.query()
    after = _core.proofs()
    assert (after[0] - before[0], after[1] - before[1]) == (10, 0), (before, after)  # streams: here, in Go
    assert (after[2] - before[2], after[3] - before[3]) == (10, 0), (before, after)  # events: here, in Go
    borrowed.synchronize()
    owner.close()
    event.close()
    neighbour.close()
    first.close()
    with pytest.raises(sb.InvalidHandleError):
        borrowed.query()
    with pytest.raises(sb.InvalidHandleError):
        borrowed_event.query()
    borrowed.close()
    borrowed_event.close()
