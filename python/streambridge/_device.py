"""Devices: a device ordinal that reads as CuPy's, PyTorch's and cuda.core's."""

from __future__ import annotations


class Device(int):
    """A device ordinal that reads as each framework expects: an ``int`` (CuPy), with
    ``type == "cuda"`` and ``index`` (PyTorch's ``torch.device``; ``str()`` is
    ``"cuda:N"``, which ``torch.device`` takes) and ``device_id`` (cuda.core)."""

    type = "cuda"

    @property
    def index(self) -> int:
        return int(self)

    device_id = index

    def __str__(self) -> str:
        return f"cuda:{int(self)}"

    def __repr__(self) -> str:
        return f"streambridge.Device({int(self)})"
