"""The unlearnable layout's case, for conftest.py and the tests that need it (a module of
its own: with interop_test in the same run, ``conftest`` names that folder's)."""

import os

import streambridge

# Where the driver's stream layout cannot be learned (STREAMBRIDGE_LAYOUT=unlearnable makes
# either driver behave as one; CI runs the suite so too), a bare handle, or an object that is
# not its framework's own, cannot be proven live and is refused, by design, with a CUDAError
# CUDA_ERROR_NOT_SUPPORTED that says why and how to vouch. A test that wraps such a handle
# meets that refusal: it is reported as an expected failure, with its reason, and only that
# exact refusal is; anything else fails as it would. Tests of what only a learned layout
# proves are marked learned_layout and skipped there, saying so. What the unlearnable case
# does is tested by test_layout_unlearnable.py and test_explain.py.
UNLEARNABLE = os.environ.get("STREAMBRIDGE_LAYOUT") == "unlearnable"


def refused_as_unprovable(exc: BaseException) -> bool:
    return (isinstance(exc, streambridge.CUDAError) and exc.name == "CUDA_ERROR_NOT_SUPPORTED"
            and "could not be learned" in str(exc))
