"""hand_over(array, stream): an array's memory stays the array's until the work submitted
to a stream so far has finished, whatever its framework's allocator does once the caller
drops it (pytorch/pytorch#33860)."""

from __future__ import annotations

from typing import Any

from ._stream import as_stream


def _keep(array: Any) -> None:
    """The host function that holds an array until its stream reaches it: the callback's
    argument is the reference, released once the call ran (on a thread of Python's)."""


def hand_over(array: Any, stream: Any) -> None:
    """Keep ``array``'s memory from being given to other work until the work submitted to
    ``stream`` so far has finished, even if the caller drops the array at once.

    A framework's caching allocator hands a freed block to new work on the stream the array
    was made on, which does not wait for other streams: a kernel still reading the array on
    ``stream`` would read the new work's data. So the array object itself (a torch tensor, a
    CuPy, Numba or JAX array, a cuda.core buffer) is kept alive until ``stream`` reaches this
    point, by a host function that holds it; its allocator frees it after that. ``stream`` is
    anything stream-like (:func:`as_stream`).

    Not ``tensor.record_stream``: torch keeps the stream's handle and uses it when the
    tensor is freed, which crashes the process once the stream is gone (seen on an
    H100 with a streambridge stream destroyed at exit before the tensor). While ``stream`` is
    capturing a graph, the host function is captured with it: the array is kept as long as
    the graph, or any executable graph made from it, can still run.
    """
    as_stream(stream).launch_host_func(_keep, array)
