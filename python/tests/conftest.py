import pytest
from _unlearnable import UNLEARNABLE, refused_as_unprovable  # shared with the tests

import streambridge


def pytest_configure(config):
    config.addinivalue_line("markers", "learned_layout: asserts what a learned stream layout proves "
                                       "(skipped under STREAMBRIDGE_LAYOUT=unlearnable)")


def pytest_collection_modifyitems(config, items):
    if not UNLEARNABLE:
        return
    skip = pytest.mark.skip(reason="SKIP: asserts what a learned stream layout proves; STREAMBRIDGE_LAYOUT="
                                   "unlearnable here (that case: test_layout_unlearnable.py)")
    for item in items:
        if "learned_layout" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if (UNLEARNABLE and call.when == "call" and report.failed and call.excinfo is not None
            and refused_as_unprovable(call.excinfo.value)):
        report.outcome = "skipped"  # pytest's own spelling of an expected failure
        report.wasxfail = "refused as unprovable (STREAMBRIDGE_LAYOUT=unlearnable), as designed"


@pytest.fixture(scope="session")
def driver_name() -> str:
    """The driver the tests run on: STREAMBRIDGE_DRIVER=sim in CI, the real one on a GPU."""
    return streambridge.driver()


@pytest.fixture
def foreign_stream(driver_name):
    """A stream made behind the package's back, as another framework would: (handle, device),
    on the driver's last device (not 0 where there are two: a device found is then not a
    default)."""
    device = streambridge.device_count() - 1
    owner = streambridge.Stream(non_blocking=True, device=device)
    yield owner.ptr, device
    owner.close()


@pytest.fixture
def stated_elsewhere(foreign_stream):
    """Another device to state for foreign_stream, and how stating it is refused: (ordinal,
    error type, message pattern): a DeviceMismatchError naming the stream's device where the
    driver has that device, a ValueError saying there is no such device where it has one."""
    _, device = foreign_stream
    other = 1 - device
    if other < streambridge.device_count():
        return other, streambridge.DeviceMismatchError, f"is on device {device}"
    return other, ValueError, f"no such device: device {other} was stated"


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
