"""Provenance: what may vouch for a handle where the driver's layout cannot be learned (see
``streams.Vouched`` in Go). A framework's own stream or event object, kept alive with the
wrapper, does: its framework keeps the handle live while the object is. An object that only
looks like one (a class naming ``torch.cuda.streams`` as its module, anything with a
``ptr``) does not: its handle is proven, or refused where it cannot be, as a bare int is."""

from __future__ import annotations

import sys
from typing import Any, Set

# The packages whose stream and event classes streambridge reads by their attributes.
FRAMEWORKS = ("torch", "cupy", "cupy_backends", "cuda", "numba")


# The classes found to be their framework's own: a class stays so, and the check costs more
# than a borrowed event's wrap (a module lookup and an attribute walk, ~0.4 us).
_own: Set[type] = set()


def frameworks_own(obj: Any) -> bool:
    """Whether obj's class is the one its framework's module defines under its name, as
    imported in this process: not a class that merely names such a module."""
    cls = type(obj)
    if cls in _own:
        return True
    module = cls.__module__
    if not isinstance(module, str) or module.split(".")[0] not in FRAMEWORKS:
        return False
    found: Any = sys.modules.get(module)
    for part in getattr(cls, "__qualname__", "").split("."):
        found = getattr(found, part, None)
    if found is not cls:
        return False
    _own.add(cls)
    return True
