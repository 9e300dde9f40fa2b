"""Graphs captured from streams (Stream.begin_capture / end_capture)."""

from __future__ import annotations

import sys
from typing import Any

from . import _core
from ._core import core as _c
from ._tables import OBJECT_GRAPH


class Graph:
    """A captured, instantiated CUDA graph (CUgraphExec), as CuPy's ``cuda.Graph``. Made by
    :meth:`Stream.end_capture`; it cannot be made from a key, and its state cannot be
    written from outside."""

    __slots__ = ("_key", "_device", "__weakref__")
    _key: int
    _device: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a Graph is made by Stream.end_capture()")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a Graph's attributes are its own: {name} cannot be set")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a Graph's attributes are its own: {name} cannot be deleted")

    def __reduce__(self) -> Any:
        raise TypeError("a Graph cannot be pickled or copied: it is this process's CUDA graph, and its key would "
                        "name another graph (or none) anywhere else")

    @classmethod
    def _made(cls, key: int, device: int) -> "Graph":
        self = cls.__new__(cls)
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "_device", device)
        return self

    def launch(self, stream: Any = None) -> None:
        """Run the graph on ``stream`` (the current streambridge stream, else the device's
        legacy default stream, if None) after the work already there (cuGraphLaunch)."""
        _c.resolve(stream, self._device)._use(lambda stream_key: _core.graph_launch(self._key, stream_key))

    def upload(self, stream: Any = None) -> None:
        """Prepare the graph's device resources ahead of its first launch (cuGraphUpload)."""
        _c.resolve(stream, self._device)._use(lambda stream_key: _core.graph_upload(self._key, stream_key))

    def close(self) -> None:
        """Destroy the executable graph (cuGraphExecDestroy); launches in flight finish."""
        key = getattr(self, "_key", 0)
        object.__setattr__(self, "_key", 0)
        if key:
            _core.release(key, OBJECT_GRAPH)

    def __del__(self) -> None:
        if sys is None or sys.meta_path is None:
            return
        try:
            self.close()
        except Exception:
            pass


def end_capture(stream: Any) -> Graph:
    """The graph the capture of ``stream`` made (Stream.end_capture)."""
    return Graph._made(stream._capture(_core.stream_end_capture), stream.device_id)
