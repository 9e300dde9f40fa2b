import os

import pytest

import streambridge
from streambridge import _core, _tables


@pytest.fixture(scope="session")
def driver_name() -> str:
    """The driver the tests run on: STREAMBRIDGE_DRIVER=sim in CI, the real one on a GPU."""
    return streambridge.driver()


@pytest.fixture
def foreign_stream(driver_name):
    """A stream made behind the package's back, as another framework would: (handle, device)."""
    device = 1 if driver_name == "sim" else 0
    key, handle = _core.new_stream(device, True, 0)
    yield handle, device
    _core.release(key, _tables.OBJECT_STREAM)
