"""Devices: the current device is the default one, as in CuPy and PyTorch, and what is on one
device is not used on another. The software driver has two devices; on a machine with one
GPU the two-device tests skip saying so."""

import threading

import pytest

import streambridge as sb
from streambridge._array import array_info
from streambridge._kernel import marshal


@pytest.fixture
def current_device_kept():
    """The calling thread's current device, set back after the test."""
    before = sb.current_device()
    yield before
    before.set_current()


def test_device_count_is_the_drivers(driver_name):
    n = sb.device_count()
    assert n >= 1
    with pytest.raises(ValueError, match="no such device"):
        sb.Stream(device=n)
    sb.Stream(device=n - 1).close()


def test_the_current_device_is_the_default_device(two_devices, current_device_kept):
    sb.Device(1).set_current()
    assert sb.current_device() == 1 and sb.current_device().index == 1
    made = [sb.Stream(), sb.Stream(non_blocking=True), sb.Event(), sb.ExternalStream(0), sb.ExternalStream(2),
            sb.Stream(null=True), sb.current_stream(), sb.Stream(device="cuda")]
    assert [m.device_id for m in made] == [1] * len(made)
    assert sb.current_stream() == sb.current_stream(1) != sb.current_stream(0)
    sb.Device(0).set_current()
    assert [m.device_id for m in (sb.Stream(), sb.Event(), sb.ExternalStream(0), sb.current_stream())] == [0] * 4


def test_each_thread_has_its_own_current_device(two_devices, current_device_kept):
    sb.Device(1).set_current()
    seen = []

    def other():
        seen.append((sb.current_device(), sb.Stream().device_id, sb.Event().device_id))
        sb.Device(1).set_current()
        seen.append((sb.current_device(), sb.Stream().device_id, sb.Event().device_id))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == [(0, 0, 0), (1, 1, 1)]  # a thread that set none is on device 0, as cudaGetDevice says
    assert sb.current_device() == 1


def test_a_device_the_driver_lacks_cannot_be_made_current(current_device_kept):
    with pytest.raises(ValueError, match="no such device"):
        sb.Device(sb.device_count()).set_current()
    assert sb.current_device() == current_device_kept


class _Array:
    """A device array that says its device (__dlpack_device__), as torch's and CuPy's do."""

    def __init__(self, device):
        self.device = device

    @property
    def __cuda_array_interface__(self):
        return {"version": 3, "data": (0x7F0000000000, False), "shape": (4,), "typestr": "<f4", "strides": None,
                "stream": None}

    def __dlpack_device__(self):
        return (2, self.device)  # kDLCUDA


def test_a_kernel_refuses_an_array_of_another_device_before_the_launch(two_devices):
    values, waits = marshal((_Array(1), 7), None, 1)
    assert values == (0x7F0000000000, 7) and waits == []
    with pytest.raises(sb.DeviceMismatchError, match="argument 0: the array is on device 1, the kernel on device 0"):
        marshal((_Array(1),), None, 0)
    with pytest.raises(sb.DeviceMismatchError, match="argument 1"):
        marshal((5, _Array(0)), None, 1)


def test_a_dlpack_array_is_exported_with_its_device_current(two_devices, current_device_kept):
    # torch exports a tensor only with its device current (BufferError otherwise): a launch
    # or a Go function on any device reads it so, and the thread's device is set back.
    from test_dlpack import Producer  # a capsule over memory made here

    class Recording(Producer):
        def __dlpack__(self, stream=None):
            self.exported_on = sb.current_device()
            return super().__dlpack__(stream)

    for current in (0, 1):
        sb.Device(current).set_current()
        p = Recording(device=1)
        assert array_info(p, 1).device == 1
        assert p.exported_on == 1 and sb.current_device() == current


@pytest.mark.parametrize("device", [2**70, -1, "1", True, 1 << 20])
def test_a_dlpack_device_that_is_no_device_is_a_value_error(device):
    from test_dlpack import Producer

    class Says(Producer):
        def __dlpack_device__(self):
            return (2, device)

    with pytest.raises(ValueError, match="device"):
        array_info(Says(), 1)
