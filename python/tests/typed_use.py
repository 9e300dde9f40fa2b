"""A user's script of the public API: mypy --strict checks it (make typecheck: the types a
user sees are what the calls give), and test_layout.py runs it on the driver in use."""

from typing import List

import streambridge as sb


def main() -> List[str]:
    seen: List[str] = []
    producer = sb.Stream(non_blocking=True)
    consumer = sb.Stream(non_blocking=True, priority=0)
    handle: int = producer.ptr
    names_of_it: List[int] = [producer.handle, producer.cuda_stream]  # cuda.core's and PyTorch's names
    assert names_of_it == [handle, handle]
    device: int = producer.device_id
    ordinals: List[int] = [producer.device.index, producer.device.device_id]
    assert ordinals == [device, device]
    borrowed = sb.ExternalStream(handle, device)
    assert borrowed == producer

    start: sb.Event = producer.record()
    end = sb.Event()
    producer.record(end)
    consumer.wait_event(end)
    consumer.wait_stream(producer)
    producer.launch_host_func(lambda arg: seen.append(str(arg)), "callback ran")
    end.synchronize()
    consumer.synchronize()
    producer.synchronize()  # the callback too
    done: bool = start.query() and consumer.query()
    ms: float = start.elapsed_time(end)
    event_handle: int = end.handle
    assert done and ms >= 0 and event_handle != 0
    names: List[bool] = [end.done, end.is_done, producer.done, producer.is_non_blocking, producer.is_nonblocking]
    assert names == [True, True, True, True, True]
    end.sync()
    producer.sync()

    with consumer:
        current = sb.current_stream()
        assert current is consumer and current.ptr == consumer.ptr
    errors: List[BaseException] = sb.callback_errors()
    seen.append(f"{len(errors)} callback errors; {sb.driver()} driver")
    for s in (borrowed, consumer, producer):
        s.close()
    return seen


if __name__ == "__main__":
    print(main())
