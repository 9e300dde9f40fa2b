"""The table at the top of bench/RESULTS.md, from one run's outputs: bench/python_bench.py's
(streambridge beside CuPy, PyTorch and cuda.core) and bench/run.sh's (the Go benchmarks and
the same loops in C). bench/latest.sh runs both on a GPU machine and this after them.

    python3 bench/table.py --python python_bench.txt --c c.txt --go go.txt \\
        --machine "one H100" [--update bench/RESULTS.md]

Without --update it prints the section; with it, it replaces the section between the
markers in that file.
"""

from __future__ import annotations

import argparse
import datetime
import re
import statistics
import sys
from pathlib import Path

BEGIN = "<!-- latest: written by bench/table.py -->"
END = "<!-- /latest -->"

RATIO = re.compile(r"^  ratio (?P<who>.+?) / (?:fastest peer \((?P<peer>.+)\)|(?P<one>[\w.]+)): "
                   r"(?P<ratio>[\d.]+)(?: \(best rounds: (?P<best>[\d.]+)\))?\s+\[bar (?P<bar>[^\]]+)\]$")
TIME = re.compile(r"^  (?P<who>.+?)\s+(?P<ns>\d+) ns$")
BENCH = re.compile(r"^Benchmark(?P<name>[A-Za-z]+(?:/goroutines=\d+)?)(?:-\d+)?\s+\d+\s+(?P<ns>[\d.]+) ns/op")


def python_rows(text: str) -> list[tuple[str, str, str, str, str, str]]:
    """(operation, spelling, ours in ns, the fastest peer and its ns, ratio (best rounds), bar)
    for each ratio python_bench.py printed."""
    rows = []
    section, times = "", {}
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            section, times = line[:-1], {}
        elif m := TIME.match(line):
            times[m["who"]] = m["ns"]
        elif m := RATIO.match(line):
            peer = m["peer"] or m["one"]
            ratio = m["ratio"] + (f" ({m['best']})" if m["best"] else "")
            rows.append((section, m["who"], time_of(times, m["who"]), f"{peer} {time_of(times, peer)}".strip(),
                         ratio, m["bar"]))
    return rows


def time_of(times: dict[str, str], who: str) -> str:
    """who's time in its section: under its own label, or a label that begins with it (the
    host callback rows name the call: "streambridge launch_host_func")."""
    if who in times:
        return times[who]
    return next((ns for label, ns in times.items() if label.startswith(who + " ")), "")


def medians(text: str) -> dict[str, float]:
    """The median ns/op of each benchmark in Go's benchmark output format."""
    seen: dict[str, list[float]] = {}
    for line in text.splitlines():
        if m := BENCH.match(line):
            seen.setdefault(m["name"], []).append(float(m["ns"]))
    return {name: statistics.median(v) for name, v in seen.items()}


def _by_count(name: str) -> tuple:
    """Orders /goroutines=N rows by N (2 before 16), the rest by name."""
    base, _, count = name.partition("/goroutines=")
    return (base, int(count) if count.isdigit() else -1)


def section(py: str, c: str, go: str, machine: str, date: str) -> str:
    out = [BEGIN, f"## Latest: {machine}, {date}", "",
           "Python (`bench/python_bench.py`: medians over rounds, in brackets by each one's best round; "
           "streambridge over the fastest peer among CuPy, PyTorch and cuda.core):", "",
           "| operation | spelling | streambridge ns | fastest peer, ns | ratio (best rounds) | bar |",
           "|---|---|---|---|---|---|"]
    out += [f"| {' | '.join(row)} |" for row in python_rows(py)]
    cm, gm = medians(c), medians(go)
    cm.setdefault("WaitStream", cm.get("RecordWait", 0.0))  # the same two driver calls, in one crossing
    out += ["", "Go against the same loops in C (`bench/run.sh`: medians of its rounds; benchstat there gives "
            "the intervals and p-values):", "",
            "| benchmark | C ns | Go ns | Go / C |", "|---|---|---|---|"]
    for name in sorted(set(cm) & set(gm), key=_by_count):
        out.append(f"| {name} | {cm[name]:.1f} | {gm[name]:.1f} | {gm[name] / cm[name]:.2f} |")
    out += [END, ""]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--c", required=True)
    ap.add_argument("--go", required=True)
    ap.add_argument("--machine", required=True)
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--update")
    a = ap.parse_args()
    text = section(Path(a.python).read_text(), Path(a.c).read_text(), Path(a.go).read_text(), a.machine, a.date)
    if not a.update:
        sys.stdout.write(text)
        return
    path = Path(a.update)
    old = path.read_text()
    if BEGIN in old and END in old:
        new = old[:old.index(BEGIN)] + text + old[old.index(END) + len(END):].lstrip("\n")
    else:  # the first time: after the title
        title, _, rest = old.partition("\n")
        new = f"{title}\n\n{text}\n{rest.lstrip(chr(10))}"
    path.write_text(new)


if __name__ == "__main__":
    main()
