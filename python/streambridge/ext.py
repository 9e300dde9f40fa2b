"""Go packages of your own, built into streambridge's native module next to it.

Build the wheel with ``STREAMBRIDGE_GO_PACKAGES`` naming them (docs/go-functions.md, "Your own Go
kernels"); then ``from streambridge.ext import gokernels`` is gopy's module for package
``gokernels``, and :func:`streambridge.go_function` lets its functions take streams and
arrays of any framework. One Go runtime serves them all, and they share streambridge's
bridge (``bridge.Default()`` in Go): two gopy modules in one process would each bring a Go
runtime, which gopy itself warns against.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, List

_NATIVE = os.path.join(os.path.dirname(__file__), "_native")
_NOT_PACKAGES = {"__init__", "go", "pyshim"}  # gopy's support module and streambridge's own


def _packages() -> List[str]:
    return sorted(f[:-3] for f in os.listdir(_NATIVE) if f.endswith(".py") and f[:-3] not in _NOT_PACKAGES)


def __getattr__(name: str) -> Any:
    if name.startswith("_") or name not in _packages():
        raise AttributeError(f"streambridge.ext has no Go package {name!r}: the native module was built with "
                             f"{_packages() or 'none'} (STREAMBRIDGE_GO_PACKAGES when building the wheel)")
    return importlib.import_module(f"streambridge._native.{name}")


def __dir__() -> List[str]:
    return _packages()
