"""Shared for the cross-framework tests: they need the real driver and the frameworks.

Without a driver they skip, loudly; under STREAMBRIDGE_REQUIRE_GPU=1 that is a failure.
"""

import os
from pathlib import Path

import pytest
from _interop import REQUIRE_GPU

import streambridge

# JAX takes 75% of the GPU's memory at its first use unless told not to: torch and CuPy
# share the GPU with it here.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def pytest_collection_modifyitems(config, items):
    try:
        name = streambridge.driver()
    except streambridge.NoDriverError as e:
        name, why = None, f"no CUDA driver: {e}"
    else:
        why = f"the {name} driver runs no framework's work" if name != "cuda" else None
    if why is None:
        return
    if REQUIRE_GPU:
        raise pytest.UsageError(f"STREAMBRIDGE_REQUIRE_GPU=1 but {why}")
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.skip(reason=f"SKIP: {why}"))



@pytest.fixture(autouse=True)
def current_device_as_found():
    """Each test starts on the current device the one before found: streambridge's default
    device is the thread's current one, and a framework may leave another current (JAX makes
    every device's context current in turn as it starts)."""
    before = streambridge.current_device()
    yield
    if streambridge.current_device() != before:
        before.set_current()
