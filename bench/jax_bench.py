"""The cost of ordering JAX's work with PyTorch's through streambridge.jax, beside the host
sync it replaces. Needs a GPU, JAX and torch.

    python3 bench/jax_bench.py [--steps 2000] [--rounds 5]

Each row is the host time of one step, the median of --rounds runs of --steps steps, after
a warm-up; a step is one jitted call of y = x * 2 on 4,096 floats, then torch's work on y's
behalf (an add on torch's stream):

  jit call                        the call alone, no ordering (JAX's dispatch)
  jit call + record               the same function with sbjax.record inside
  record, then torch waits        + torch's stream waits for the event on the GPU, then adds
  host sync, then torch           what it replaces: the call, y.block_until_ready(), then the add
  jit call + wait                 the function with sbjax.wait(x, event) inside (torch -> JAX)

"one ordering call" is the second row less the first: what a record inside the jitted
function costs on the host. The last column is each row over the host sync's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import torch  # noqa: E402

import streambridge as sb  # noqa: E402
import streambridge.jax as sbjax  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    done, ready = sb.Event(disable_timing=True), sb.Event(disable_timing=True)
    plain = jax.jit(lambda x: x * 2)
    recorded = jax.jit(lambda x: sbjax.record(x * 2, done))
    waited = jax.jit(lambda x: sbjax.wait(x, ready) * 2)
    x = jnp.ones(4096, jnp.float32)
    ts = torch.cuda.Stream()
    side = sb.as_stream(ts)
    t = torch.zeros(4096, device="cuda")
    side.record(ready)

    def torch_add():
        with torch.cuda.stream(ts):
            t.add_(1.0)

    steps = {
        "jit call": lambda: plain(x),
        "jit call + record": lambda: recorded(x),
        "record, then torch waits": lambda: (recorded(x), side.wait_event(done), torch_add()),
        "host sync, then torch": lambda: (plain(x).block_until_ready(), torch_add()),
        "jit call + wait": lambda: waited(x),
    }
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(2):  # compile and warm up
        for step in steps.values():
            for _ in range(200):
                step()
    torch.cuda.synchronize()
    for _ in range(a.rounds):
        for name, step in steps.items():
            torch.cuda.synchronize()
            jax.block_until_ready(x)
            t0 = time.perf_counter()
            for _ in range(a.steps):
                step()
            times[name].append((time.perf_counter() - t0) / a.steps * 1e6)
            torch.cuda.synchronize()
    med = {name: statistics.median(v) for name, v in times.items()}
    sync = med["host sync, then torch"]
    print(f"JAX {jax.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}; "
          f"median of {a.rounds} x {a.steps} steps")
    print(f"{'step':<28}{'us/step':>10}{'of host sync':>14}")
    for name, us in med.items():
        print(f"{name:<28}{us:>10.2f}{us / sync:>14.2f}")
    print(f"one ordering call (record) inside a jitted function: {med['jit call + record'] - med['jit call']:.2f} us; "
          f"(wait): {med['jit call + wait'] - med['jit call']:.2f} us")


if __name__ == "__main__":
    main()
