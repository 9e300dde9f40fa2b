"""Graphs captured from streams (Stream.begin_capture / end_capture)."""

from __future__ import annotations

import sys
from typing import Any

from . import _core
from ._stream import resolve


class Graph:
    """A captured, instantiated CUDA graph (CUgraphExec), as CuPy's ``cuda.Graph``."""

    def __init__(self, key: int, device: int) -> None:
        self._key = key
        self._device = device


    def launch(self, stream: Any = None) -> None:
        """Run the graph on ``stream`` (the current streambridge stream, else the device's
        legacy default stream, if None) after the work already there (cuGraphLaunch)."""
        _core.graph_launch(self._key, resolve(stream, self._device)._key)

    def upload(self, stream: Any = None) -> None:
        """Prepare the graph's device resources ahead of its first launch (cuGraphUpload)."""
        _core.graph_upload(self._key, resolve(stream, self._device)._key)

    def close(self) -> None:
        """Destroy the executable graph (cuGraphExecDestroy); launches in flight finish."""
        key, self._key = self._key, 0
        if key:
            _core.typed_close(key)

    def __del__(self) -> None:
        if sys is None or sys.meta_path is None:
            return
        try:
            self.close()
        except Exception:
            pass
