import os

import pytest

import streambridge


@pytest.fixture(scope="session")
def driver_name() -> str:
    """The driver the tests run on: STREAMBRIDGE_DRIVER=sim in CI, the real one on a GPU."""
    return streambridge.driver()


@pytest.fixture
def foreign_stream(driver_name):
    """A stream made behind the package's back, as another framework would: (handle, device)."""
    device = 1 if driver_name == "sim" else 0
    owner = streambridge.Stream(non_blocking=True, device=device)
    yield owner.ptr, device
    owner.close()


@pytest.fixture
def two_devices(driver_name) -> None:
    """Skips, saying so, where there is no device 1 (one GPU); the software driver has two."""
    try:
        streambridge.Stream(device=1).close()
    except ValueError as e:  # the documented promise (docs/python.md) for a device the driver does not have
        if "no such device" not in str(e):
            raise
        pytest.skip(f"SKIP: needs two devices, the {driver_name} driver has one: {e}")


@pytest.fixture(autouse=True)
def no_current_stream_left_behind():
    """Each test starts with no current streambridge stream on this thread, whatever an
    earlier test made current with use() (which nothing ends, as in CuPy)."""
    from streambridge import _stream

    _stream._current_streams.__init__()
    yield
    _stream._current_streams.__init__()
