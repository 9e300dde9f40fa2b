"""Fixtures shared by python/tests and interop_test (pytest loads this for both)."""

import gc
import time

import pytest


@pytest.fixture
def released():
    """released(ref, timeout=10.0): whether ref's object is collected within timeout. The
    driver destroys a graph's user objects on a thread of its own, after the call that
    destroyed the graph, and the interpreter's main thread then frees what they held."""

    def wait(ref, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            gc.collect()
            if ref() is None:
                return True
            time.sleep(0.005)
        return False

    return wait


@pytest.fixture
def no_callback_errors():
    """Fails a test that leaves an exception of a host callback unexamined."""
    import streambridge

    streambridge.callback_errors()
    yield
    assert streambridge.callback_errors() == []
