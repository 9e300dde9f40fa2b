"""On a machine with two GPUs: a stream's device is read from its handle."""

import threading

import pytest
from _interop import framework

import streambridge


def two_devices(torch):
    if torch.cuda.device_count() < 2:
        pytest.skip(f"SKIP: needs two GPUs, this machine has {torch.cuda.device_count()}")


def test_a_stream_on_device_1_is_found_there_without_being_told():
    torch, cupy = framework("torch"), framework("cupy")
    two_devices(torch)
    ts = torch.cuda.Stream(device=1)
    with cupy.cuda.Device(1):
        cs = cupy.cuda.Stream(non_blocking=True)
    for handle in (ts.cuda_stream, cs.ptr):
        s = streambridge.ExternalStream(handle)
        assert s.device_id == 1 and s.device.index == 1
        assert streambridge.ExternalStream(handle, 1).device_id == 1
        with pytest.raises(streambridge.DeviceMismatchError, match="device 1, not device 0"):
            streambridge.ExternalStream(handle, 0)  # CuPy would accept this silently
        with pytest.raises(streambridge.DeviceMismatchError):
            streambridge.ExternalStream(stream_ptr=handle, device=torch.device("cuda:0"))
    back = streambridge.as_stream(ts).to_torch()
    assert back.device == torch.device("cuda:1") and back.cuda_stream == ts.cuda_stream


def test_ordering_across_devices():
    torch = framework("torch")
    two_devices(torch)
    a = streambridge.Stream(device=1)
    b = streambridge.Stream(device=0)
    assert (a.device_id, b.device_id) == (1, 0)
    x = torch.zeros(1 << 20, device="cuda:1")
    with torch.cuda.stream(a.to_torch()):
        torch.cuda._sleep(int(0.2 * 2e9))
        x.fill_(1)
    b.wait_stream(a)  # an event on device 1 waited on by a stream on device 0
    assert b.query() is False
    b.synchronize()
    assert a.query() is True and x.sum().item() == x.numel()


def test_kernels_launch_on_their_own_device_only():
    # A kernel loaded on device 1 launches on a device-1 stream (from C, where the fast calls
    # are on); one loaded on device 0 refuses that stream before the driver sees it.
    torch = framework("torch")
    two_devices(torch)
    src = 'extern "C" __global__ void put(long long *out, long long v) { *out = v; }'
    on_1 = streambridge.Module(src, device=1).get_kernel("put")
    on_0 = streambridge.Module(src).get_kernel("put")
    s = streambridge.Stream(device=1)
    out = torch.zeros(1, dtype=torch.int64, device="cuda:1")
    torch.cuda.synchronize(1)
    on_1(1, 1, (out.data_ptr(), 42), stream=s)
    s.synchronize()
    assert out.item() == 42
    with pytest.raises(streambridge.DeviceMismatchError):
        on_0(1, 1, (out.data_ptr(), 7), stream=s)
    s.synchronize()
    assert out.item() == 42


def test_to_cupy_keeps_the_device_whichever_is_current():
    torch, cupy = framework("torch"), framework("cupy")
    two_devices(torch)
    s = streambridge.Stream(device=1, non_blocking=True)
    cs = s.to_cupy()
    assert cs.device_id == 1
    with cupy.cuda.Device(0):  # CuPy's current device is 0; the stream's is 1
        with cupy.cuda.Device(cs.device_id), cs:
            x = cupy.arange(1000, dtype=cupy.float32) * 2
    cs.synchronize()
    assert x.device.id == 1
    with cupy.cuda.Device(1):  # CuPy reduces on the current device: x's (device 0 would read it without peer access)
        assert float(x.sum()) == 999 * 1000


def test_recording_an_event_of_another_device_names_both():
    torch = framework("torch")
    two_devices(torch)
    e, s = streambridge.Event(device=0), streambridge.Stream(device=1)
    with pytest.raises(streambridge.DeviceMismatchError, match="device 0.*device 1"):
        s.record(e)
    with pytest.raises(streambridge.DeviceMismatchError, match="device 0.*device 1"):
        e.record(s)
    e.record(streambridge.Stream(device=0))
    s.wait_event(e)  # a wait may cross devices: the driver allows it
    s.synchronize()


def test_the_current_device_as_torch_and_cupy_set_it_is_the_default_device():
    # torch.cuda.set_device and `with cupy.cuda.Device(1)` make device 1 current (cudaSetDevice):
    # streambridge's constructors given no device are then there, as torch's and CuPy's are.
    torch, cupy = framework("torch"), framework("cupy")
    two_devices(torch)
    src = 'extern "C" __global__ void put(long long *out, long long v) { *out = v; }'

    def made_here():
        return [streambridge.Stream().device_id, streambridge.Stream(non_blocking=True).device_id,
                streambridge.Event().device_id, streambridge.ExternalStream(0).device_id,
                streambridge.current_stream().device_id, streambridge.current_device(),
                streambridge.Module(src)._device]

    torch.cuda.set_device(1)
    try:
        assert torch.cuda.Stream().device.index == 1
        assert made_here() == [1] * 7
    finally:
        torch.cuda.set_device(0)
    assert made_here() == [0] * 7
    with cupy.cuda.Device(1):
        assert cupy.cuda.Stream().device_id == 1
        assert made_here() == [1] * 7
        s = streambridge.Stream()
        out = torch.zeros(1, dtype=torch.int64, device="cuda:1")
        torch.cuda.synchronize(1)
        streambridge.Module(src).get_kernel("put")(1, 1, (out, 5), stream=s)  # all on device 1
        s.synchronize()
        assert out.item() == 5
    assert made_here() == [0] * 7
    with torch.cuda.device(1):
        e = streambridge.Event()
        e.record(streambridge.current_stream())  # device 1's legacy stream
        e.synchronize()
        assert e.device_id == 1


def test_device_0_waits_for_slow_device_1_work_from_8_threads():
    # Each thread: a fill on a stream of device 1, held back by a host callback until the
    # thread lets it go, and slow; a stream of device 0 waits for it through streambridge,
    # then copies the data across (a peer copy on device 0's stream). A missing wait would
    # copy the zeros that were there before the fill.
    torch, cupy = framework("torch"), framework("cupy")
    two_devices(torch)
    n = 1 << 20
    results, waited = {}, {}

    def work(i):
        a = streambridge.Stream(device=1, non_blocking=True)
        b = streambridge.Stream(device=0, non_blocking=True)
        x = torch.zeros(n, device="cuda:1")
        y = torch.empty(n, device="cuda:0")
        torch.cuda.synchronize(1)
        gate = threading.Event()
        a.launch_host_func(lambda _: gate.wait(30), None)
        with torch.cuda.device(1), torch.cuda.stream(a.to_torch()):
            torch.cuda._sleep(int(0.05 * 2e9))
            x.fill_(float(i + 1))
        b.wait_stream(a)
        cupy.cuda.runtime.memcpyPeerAsync(y.data_ptr(), 0, x.data_ptr(), 1, x.numel() * 4, b.ptr)
        waited[i] = b.query() is False  # the copy waits: device 1's work cannot have ended, the gate holds it
        gate.set()
        b.synchronize()
        results[i] = (float(y.min().item()), float(y.max().item()))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == {i: (i + 1.0, i + 1.0) for i in range(8)}
    assert all(waited.values()) and len(waited) == 8


def test_a_device_0_kernel_refuses_a_device_1_tensor_before_the_launch():
    torch = framework("torch")
    two_devices(torch)
    src = 'extern "C" __global__ void put(long long *out, long long v) { *out = v; }'
    on_0 = streambridge.Module(src, device=0).get_kernel("put")
    s0 = streambridge.Stream(device=0)
    on_1 = torch.zeros(1, dtype=torch.int64, device="cuda:1")
    with pytest.raises(streambridge.DeviceMismatchError, match="argument 0: the array is on device 1, the kernel on "
                       "device 0"):
        on_0(1, 1, (on_1, 7), stream=s0)
    with pytest.raises(streambridge.DeviceMismatchError):
        streambridge.launch(on_0, 1, 1, (on_1, 7), stream=s0, hand_over=True)
    on_0_ok = torch.zeros(1, dtype=torch.int64, device="cuda:0")
    on_0(1, 1, (on_0_ok, 9), stream=s0)  # device 0's context is unharmed
    s0.synchronize()
    torch.cuda.synchronize(1)
    assert (on_0_ok.item(), on_1.item()) == (9, 0)
    # A device-1 kernel takes the device-1 tensor while device 0 is current (torch exports
    # DLPack only with its tensor's device current: the launch reads it so), and device 0
    # stays current.
    assert streambridge.current_device() == 0
    s1 = streambridge.Stream(device=1)
    streambridge.Module(src, device=1).get_kernel("put")(1, 1, (on_1, 11), stream=s1)
    s1.synchronize()
    assert on_1.item() == 11 and streambridge.current_device() == 0


def test_an_event_of_one_device_recorded_on_the_others_torch_stream_is_refused():
    torch = framework("torch")
    two_devices(torch)
    e = streambridge.Event(device=0)
    other = streambridge.as_stream(torch.cuda.Stream(device=1))
    with pytest.raises(streambridge.DeviceMismatchError, match="device 0.*device 1"):
        e.record(other)
    with pytest.raises(streambridge.DeviceMismatchError, match="device 0.*device 1"):
        other.record(e)
