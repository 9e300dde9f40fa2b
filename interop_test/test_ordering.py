"""Work ordered through streambridge between two frameworks runs in order.

The producer is slow on purpose (a kernel that spins for SLOW_MS before it writes), so a
missing wait shows: the consumer would read the old data and finish first. Each test also
runs the same pair without the wait and sees exactly that.
"""

import pytest
from _interop import SPIN, framework

import streambridge

SLOW_MS = 300
N = 1 << 20


def cupy_slow_fill(cupy, stream, out, value):
    """Enqueues on a cupy stream: spin SLOW_MS, then out[:] = value."""
    kernel = cupy.RawKernel(SPIN, "spin_then_fill")
    with stream:
        kernel((64,), (256,), (out, cupy.int32(out.size), cupy.float32(value), cupy.uint64(SLOW_MS * 1_000_000)))


def torch_slow_fill(torch, stream, out, value):
    with torch.cuda.stream(stream):
        torch.cuda._sleep(int(SLOW_MS * 1e-3 * 2e9))  # cycles; ~SLOW_MS at the H200's ~2 GHz
        out.fill_(value)


def order(consumer, producer, ordered, keep):
    """consumer waits for producer through streambridge; with keep, the wrappers outlive the
    wait (else they are dropped at once, closing the producer's fence event)."""
    if not ordered:
        return None
    a, b = streambridge.as_stream(consumer), streambridge.as_stream(producer)
    a.wait_stream(b)
    return (a, b) if keep else None


ORDERED = pytest.mark.parametrize("ordered,keep", [(True, False), (True, True), (False, False)],
                                  ids=["through streambridge", "through streambridge, wrappers kept",
                                       "no wait (control)"])


@ORDERED
def test_torch_producer_cupy_consumer(ordered, keep):
    torch, cupy = framework("torch"), framework("cupy")
    producer, consumer = torch.cuda.Stream(), cupy.cuda.Stream(non_blocking=True)
    x = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    xc = cupy.asarray(x)  # a view of the same memory
    with consumer:  # compile the kernel now: its first launch takes longer than SLOW_MS
        (xc * 2).sum()
    consumer.synchronize()
    torch_slow_fill(torch, producer, x, 1.0)
    kept = order(consumer, producer, ordered, keep)
    with consumer:
        y = xc * 2
        after = cupy.cuda.Event(disable_timing=True)
        after.record(consumer)
    consumer_pending, event_pending, producer_pending = not consumer.done, not after.done, not producer.query()
    consumer.synchronize()
    torch.cuda.synchronize()
    del kept
    seen = (f"consumer stream pending {consumer_pending}, event after its work pending {event_pending}, "
            f"producer pending {producer_pending}, y in [{float(y.min())}, {float(y.max())}]")
    if ordered:
        assert consumer_pending and float(y.min()) == 2.0 and float(y.max()) == 2.0, seen
    else:
        assert not consumer_pending and float(y.max()) == 0.0, "without the wait the consumer reads stale data"


@ORDERED
def test_cupy_producer_torch_consumer(ordered, keep):
    torch, cupy = framework("torch"), framework("cupy")
    producer, consumer = cupy.cuda.Stream(non_blocking=True), torch.cuda.Stream()
    x = torch.zeros(N, device="cuda")
    cupy_slow_fill(cupy, producer, cupy.asarray(x), 0.0)  # compiles the kernel, off the clock
    with torch.cuda.stream(consumer):
        (x + 1).sum()
    torch.cuda.synchronize()
    producer.synchronize()
    cupy_slow_fill(cupy, producer, cupy.asarray(x), 3.0)
    kept = order(consumer, producer, ordered, keep)
    with torch.cuda.stream(consumer):
        y = x + 1
    consumer_pending = not consumer.query()
    consumer.synchronize()
    producer.synchronize()
    del kept
    if ordered:
        assert consumer_pending
        assert torch.all(y == 4).item()
    else:
        assert not consumer_pending and torch.all(y == 1).item()


@pytest.mark.parametrize("ordered", [True, False], ids=["through streambridge", "no wait (control)"])
def test_torch_producer_cuda_core_consumer_via_events(ordered):
    torch, core = framework("torch"), framework("cuda.core")
    dev = core.Device(0)
    dev.set_current()
    producer, consumer = torch.cuda.Stream(), dev.create_stream()
    x = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    torch_slow_fill(torch, producer, x, 1.0)
    if ordered:  # an event streambridge records on torch's stream, waited on by cuda.core's
        done = streambridge.as_stream(producer).record()
        streambridge.as_stream(consumer).wait_event(done)
    marker = consumer.record()  # cuda.core's own event, after the wait
    consumer_pending = not marker.is_done
    marker.sync()
    producer_done_first = producer.query()
    torch.cuda.synchronize()
    if ordered:
        assert consumer_pending and producer_done_first
    else:
        assert not consumer_pending
