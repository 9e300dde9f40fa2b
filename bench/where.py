"""Where a loop's time goes, from py-spy's raw samples (`py-spy record --native -f raw`:
one line a stack, `frame;frame;...;leaf count`): each sample is given to the frame nearest
its leaf that belongs to the CUDA driver (libcuda), to the interpreter (a line of Python
code), or to streambridge's C core (a line of python/native's sources); libc, the dynamic
loader and CPython's own functions belong to whichever of those called them.

    python3 bench/where.py samples.txt [...]
"""

from __future__ import annotations

import collections
import re
import sys

DRIVER = "the CUDA driver (libcuda, and the libc it calls)"
INTERPRETER = "the interpreter (Python code, and what it runs in CPython and libc)"
CORE = "streambridge's C core (and the CPython and libc it calls)"
UNKNOWN = "libc or the loader, called from nothing known"

WHERE = re.compile(r"\(([^()]*)\)\s*$")  # a frame's place: "(libcuda.so.1)", "(x.py:10)", "(gate.inc:11)"


def owner(frame: str) -> str | None:
    """Whose frame is: DRIVER, INTERPRETER, CORE, another shared object's name, or None for
    libc, the loader and CPython (whose caller decides)."""
    m = WHERE.search(frame)
    where = m.group(1) if m else ""
    if "libcuda" in where:
        return DRIVER
    if re.search(r"\.py:\d+$", where):
        return INTERPRETER
    if re.search(r"\.(c|inc|h):\d+$", where):
        return CORE
    if ".so" in where and not where.startswith(("libc.so", "ld-linux", "libpython", "libm.so")):
        return where
    return None


def attribute(raw: str) -> tuple[collections.Counter[str], collections.Counter[str], int]:
    """(samples by owner, C core samples by its innermost function, all samples), leaving
    out the import (importlib's frames)."""
    owners: collections.Counter[str] = collections.Counter()
    core: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit() or "_find_and_load" in stack:
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        found = next(((o, f) for f in reversed(frames) if (o := owner(f)) is not None), (UNKNOWN, ""))
        owners[found[0]] += n
        if found[0] == CORE:
            core[found[1].split(" (")[0]] += n
    return owners, core, total


def main() -> int:
    for path in sys.argv[1:]:
        with open(path) as f:
            owners, core, total = attribute(f.read())
        print(f"{path}: {total} samples")
        for who, n in owners.most_common():
            print(f"  {100 * n / max(total, 1):5.1f}%  {who}")
        for fn, n in core.most_common(8):
            print(f"         {100 * n / max(total, 1):5.1f}%  in the C core: {fn}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
