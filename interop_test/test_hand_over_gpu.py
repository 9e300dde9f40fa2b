"""hand_over on the GPU: a slow kernel reads an array on a streambridge stream, the caller
drops the array at once and its framework allocates and writes a new one of the same size.
Without hand_over the allocator gives the new array the old memory and the kernel reads the
new values (pytorch/pytorch#33860); with it, the kernel reads the original ones."""

import numpy
import pytest
from _interop import framework, run_child

import streambridge as sb

N = 1 << 20
SLOW_COPY = r"""
extern "C" __global__ void slow_copy(const float* x, float* out, long long n, long long spin) {
    long long start = clock64();
    while (clock64() - start < spin) {}
    for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = x[i];
}
extern "C" __global__ void fill(float* x, float value, long long n) {
    for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = value;
}
"""


def consume_then_reallocate(lib, hand):
    """The values a slow consumer on a streambridge stream read from an array that was
    dropped right after the launch and whose memory its framework could give away."""
    module = sb.Module(SLOW_COPY)
    kernel = module.get_kernel("slow_copy")
    arg = lambda a: a  # noqa: E731
    values = lambda a: set(a.tolist())  # noqa: E731
    if lib == "cuda.core":  # a Buffer from the device's stream-ordered pool, filled by a kernel
        cc, cupy = framework("cuda.core"), framework("cupy")
        dev = cc.Device(0)
        dev.set_current()
        producer = dev.create_stream()
        fill = module.get_kernel("fill")

        def filled(value):
            b = dev.allocate(N * 4, stream=producer)
            fill(256, 256, (numpy.uint64(int(b.handle)), numpy.float32(value), N), stream=sb.as_stream(producer))
            return b

        x, out, new = filled(1.0), filled(0.0), lambda: filled(7.0)
        ptr = lambda a: int(a.handle)  # noqa: E731
        arg = lambda a: numpy.uint64(int(a.handle))  # noqa: E731
        values = lambda a: set(cupy.ndarray((N,), cupy.float32, cupy.cuda.MemoryPointer(  # noqa: E731
            cupy.cuda.UnownedMemory(int(a.handle), N * 4, a), 0)).get().tolist())
    elif lib == "torch":
        torch = framework("torch")
        producer = torch.cuda.current_stream()
        x = torch.full((N,), 1.0, device="cuda")
        out = torch.zeros(N, device="cuda")
        new = lambda: torch.full((N,), 7.0, device="cuda")  # noqa: E731
        ptr = lambda a: a.data_ptr()  # noqa: E731
    else:
        cupy = framework("cupy")
        producer = cupy.cuda.get_current_stream()
        x = cupy.full((N,), 1.0, dtype=cupy.float32)
        out = cupy.zeros(N, dtype=cupy.float32)
        new = lambda: cupy.full((N,), 7.0, dtype=cupy.float32)  # noqa: E731
        ptr = lambda a: a.data.ptr  # noqa: E731
    consumer = sb.Stream(non_blocking=True)
    consumer.wait_stream(sb.as_stream(producer))  # x and out are written
    old = ptr(x)
    args = (arg(x), arg(out), N, 200_000_000)  # about 0.1 s of spinning first
    if hand == "launch option":
        sb.launch(kernel, 256, 256, args, stream=consumer, hand_over=True)
    else:
        kernel(256, 256, args, stream=consumer)
    if hand == "hand_over":
        sb.hand_over(x, consumer)
    del args
    del x
    y = new()  # on the producer's stream, which does not wait for the consumer
    reused = ptr(y) == old
    consumer.synchronize()
    return values(out), reused


@pytest.mark.parametrize("lib", ["torch", "cupy", "cuda.core"])
def test_without_hand_over_the_consumer_reads_the_new_arrays_values(lib):
    got, reused = consume_then_reallocate(lib, hand=None)
    print(lib, "without hand_over: memory reused", reused, "consumer read", got)
    assert reused and got == {7.0}, "the corruption hand_over prevents"


@pytest.mark.parametrize(("lib", "hand"), [("torch", "hand_over"), ("torch", "launch option"), ("cupy", "hand_over"),
                                           ("cupy", "launch option"), ("cuda.core", "hand_over")])
def test_with_hand_over_the_consumer_reads_the_original_values(lib, hand):
    """cuda.core's Buffer is passed as a pointer (it speaks neither array protocol), so only
    hand_over itself applies to it; releasing it frees its memory with a CUDA call, which the
    release on Python's main thread allows (a host function may not make one)."""
    got, reused = consume_then_reallocate(lib, hand=hand)
    print(lib, f"with {hand}: memory reused", reused, "consumer read", got)
    assert not reused and got == {1.0}


EXIT_AFTER_HAND_OVERS = r"""
import sys
import streambridge as sb
lib = sys.argv[1]
if lib == "torch":
    import torch
    a = torch.zeros(4, device="cuda")
else:
    import cupy
    a = cupy.zeros(4, dtype=cupy.float32)
s = sb.Stream(non_blocking=True)
for _ in range(20000):
    sb.hand_over(a, s)
print("handed over", flush=True)
"""


@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_a_process_that_exits_with_hand_overs_pending_exits_cleanly(lib):
    # With torch's record_stream the tensor, freed at exit after the stream was destroyed,
    # killed the process (SIGSEGV, H100); the array is now held by a host function instead.
    framework(lib)
    rc, out, err = run_child(EXIT_AFTER_HAND_OVERS, lib)
    assert rc == 0, err[-2000:]
    assert out == "handed over\n"
