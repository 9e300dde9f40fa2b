"""Fuzzes what streambridge reads from objects it is handed (atheris): the __cuda_stream__
protocol (the C core's reader and the Python one), stream and event handles, stream-like
attributes and __cuda_array_interface__ dicts, and the arguments around them (devices,
priorities, flags, options, what a stream waits on or an event is recorded on, elapsed
time's events, a module's options). Every input must give a result or a typed
error (TypeError, ValueError and the package's own); anything else, and a handle that
reaches the software driver unproven (which ends the process, exit status 86), is a
finding.

    make fuzz                              # 60 s on the software driver (FUZZ_SECONDS=...)
    python3 python/fuzz/protocol_fuzz.py -max_total_time=600
"""

import os
import sys

os.environ.setdefault("STREAMBRIDGE_DRIVER", "sim")

import atheris  # noqa: E402

with atheris.instrument_imports():
    import streambridge as sb
    from streambridge import _array

TYPED = (TypeError, ValueError, sb.CUDAError)
OWNER = sb.Stream(non_blocking=True)  # a live handle for inputs to name
EVENT = sb.Event(disable_timing=True)


def value(fdp: atheris.FuzzedDataProvider, depth: int = 0):
    """A value of any of the shapes a caller could hand over, some of them near the truth."""
    kind = fdp.ConsumeIntInRange(0, 11 if depth < 2 else 7)
    if kind == 0:
        return fdp.ConsumeInt(fdp.ConsumeIntInRange(1, 9))
    if kind == 1:
        return OWNER.ptr + fdp.ConsumeIntInRange(-64, 64)
    if kind == 2:
        return EVENT.ptr + fdp.ConsumeIntInRange(-64, 64)
    if kind == 3:
        return fdp.ConsumeIntInRange(-2, 3)
    if kind == 4:
        return fdp.ConsumeUnicodeNoSurrogates(8)
    if kind == 5:
        return fdp.ConsumeBytes(8)
    if kind == 6:
        return fdp.ConsumeRegularFloat()
    if kind == 7:
        return None if fdp.ConsumeBool() else fdp.ConsumeBool()
    if kind == 8:
        return tuple(value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 3)))
    if kind == 9:
        return [value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 3))]
    if kind == 10:
        return {k: value(fdp, depth + 1) for k in ("shape", "typestr", "data", "version", "strides", "stream")
                if fdp.ConsumeBool()}
    return Speaks(value(fdp, depth + 1))


class Speaks:
    """An object speaking __cuda_stream__ (and __cuda_array_interface__) with a fuzzed answer."""

    def __init__(self, answer):
        self.answer = answer
        self.cuda_stream = answer
        self.ptr = answer

    def __cuda_stream__(self):
        return self.answer

    @property
    def __cuda_array_interface__(self):
        return self.answer


def one(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    calls = [
        lambda v: sb.Stream.from_external(Speaks(v)),
        lambda v: sb.as_stream(Speaks(v)),
        lambda v: sb.as_stream(v),
        lambda v: sb.ExternalStream(v),
        lambda v: sb.ExternalStream(v, value(fdp)),
        lambda v: sb.Event.from_handle(v),
        lambda v: _array.array_info(Speaks(v)),
        lambda v: sb.Stream(non_blocking=v),
        lambda v: sb.Stream(priority=v),
        lambda v: sb.Stream(device=v),
        lambda v: sb.Stream(null=v, ptds=value(fdp)),
        lambda v: sb.Event(disable_timing=v, blocking=value(fdp)),
        lambda v: sb.Event(enable_timing=v, interprocess=value(fdp)),
        lambda v: sb.Device(v),
        lambda v: OWNER.wait(v),
        lambda v: OWNER.wait_stream(v),
        lambda v: OWNER.wait_event(v),
        lambda v: EVENT.record(v),
        lambda v: EVENT.wait(v),
        lambda v: sb.get_elapsed_time(v, EVENT),
        lambda v: sb.Module('extern "C" __global__ void k() {}', options=v),
        lambda v: sb.Module(v),
    ]
    call = calls[fdp.ConsumeIntInRange(0, len(calls) - 1)]
    try:
        got = call(value(fdp))
    except TYPED:
        return
    close = getattr(got, "close", None)
    if close is not None and got is not OWNER and got is not EVENT:
        close()


def main() -> None:
    atheris.Setup(sys.argv, one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
