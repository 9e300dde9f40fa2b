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
import importlib.util
import re
import statistics
import sys
from pathlib import Path

BEGIN = "<!-- latest: written by bench/table.py -->"
END = "<!-- /latest -->"

RATIO = re.compile(r"^  ratio (?P<who>.+?) / (?:fastest peer \((?P<peer>.+)\)|(?P<one>[\w.]+)): "
                   r"(?P<ratio>[\d.]+)(?: \(best rounds: (?P<best>[\d.]+)(?:; by round: (?P<paired>[\d.]+))?\))?"
                   r"\s+\[bar (?P<bar>[^\]]+)\]$")
TIME = re.compile(r"^  (?P<who>.+?)\s+(?P<ns>\d+) ns$")
INPROC = re.compile(r"^  (?P<op>.+?) \((?P<who>streambridge.*)\): \d+ ns against C's \d+ ns: (?P<ratio>[\d.]+)"
                    r"(?: \(best rounds: (?P<best>[\d.]+)(?:; by round: (?P<paired>[\d.]+))?\))?")
BENCH = re.compile(r"^Benchmark(?P<name>[A-Za-z]+(?:/[A-Za-z]+)?(?:/goroutines=\d+)?)(?:-\d+)?\s+\d+\s+(?P<ns>[\d.]+) ns/op")
IN_GO = "InProcessC"  # Go's BenchmarkInProcessC and …CThroughput: C's loops inside the Go benchmark's process
# The other sides of the same turns as C's (both InProcessC benchmarks): go-ns/op (Go's
# operation), raw-ns/op (its driver calls through the trampoline, no layer), relaxed-ns/op
# (C's query with the capture mode relaxed around it).
TURNS = re.compile(r"\s(?P<ns>[\d.]+) (?P<side>[a-z]+)-ns/op")


def _bench_labels() -> tuple[str, str]:
    """python_bench.py's label of its rows of the C floor in its own process (not peers), and
    its host callback section's heading, declared there; read from the file beside this one
    (it imports nothing heavy at load)."""
    path = Path(__file__).resolve().parent / "python_bench.py"
    spec = importlib.util.spec_from_file_location("python_bench", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.IN_C), str(module.CALLBACK)


IN_C, CALLBACK = _bench_labels()


# The loop of bench/driver_bench.c (C over the driver API, the floor) that each Python
# operation is measured against, where it has one.
C_FLOOR = {"record+wait": "RecordWait", "query": "Query", "event create+close": "EventCreateClose",
           "empty kernel launch": "LaunchEmpty", CALLBACK: "HostFuncLatency"}


def python_rows(text: str, c_floor: dict[str, float]) -> list[tuple[str, ...]]:
    """(operation, spelling, ours in ns, the fastest peer and its ns, every peer's ns, the C
    floor's ns, ratio to the fastest peer (best rounds; by round), ours over the C floor, ours over C in
    the benchmark's own process, bar) for each ratio python_bench.py printed; c_floor holds
    the C loops' medians (bench/run.sh)."""
    inproc = {(m["op"], m["who"]): with_rounds(m) for line in text.splitlines() if (m := INPROC.match(line))}
    rows = []
    section, times = "", {}
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            section, times = line[:-1], {}
        elif m := TIME.match(line):
            times[m["who"]] = m["ns"]
        elif m := RATIO.match(line):
            peer = m["peer"] or m["one"]
            ratio = with_rounds(m)
            ours = time_of(times, m["who"])
            peers = ", ".join(f"{who} {ns}" for who, ns in times.items() if not who.startswith(("streambridge", IN_C)))
            floor = c_floor.get(C_FLOOR.get(section, ""))
            over_floor = f"{float(ours) / floor:.2f}" if floor and ours else ""
            rows.append((section, m["who"], ours, f"{peer} {time_of(times, peer)}".strip(), peers,
                         f"{floor:.0f}" if floor else "", ratio, over_floor, inproc.get((section, m["who"]), ""),
                         m["bar"]))
    return rows


def with_rounds(m: re.Match[str]) -> str:
    """A ratio, and in brackets the best rounds' and the median of each round's, where
    python_bench.py printed them."""
    rounds = "; ".join(m[k] for k in ("best", "paired") if m[k])
    return m["ratio"] + (f" ({rounds})" if rounds else "")


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


def beside_go(text: str) -> dict[str, tuple[float, dict[str, float]]]:
    """C's loops in the Go benchmark's process, by the name of the Go row they pair with: the
    median of C's ns/op, and by side (go, raw, relaxed: TURNS) the median of each line's
    side over its C, the time in the same turns."""
    cs: dict[str, list[float]] = {}
    ratios: dict[str, dict[str, list[float]]] = {}
    for line in text.splitlines():
        m = BENCH.match(line)
        sides = {t["side"]: float(t["ns"]) for t in TURNS.finditer(line)}
        if m and m["name"].startswith(IN_GO) and "go" in sides:
            name = m["name"].partition("/")[2]
            cs.setdefault(name, []).append(float(m["ns"]))
            for side, ns in sides.items():
                ratios.setdefault(name, {}).setdefault(side, []).append(ns / float(m["ns"]))
    return {name: (statistics.median(v), {side: statistics.median(r) for side, r in ratios[name].items()})
            for name, v in cs.items()}


def _by_count(name: str) -> tuple:
    """Orders /goroutines=N rows by N (2 before 16), the rest by name."""
    base, _, count = name.partition("/goroutines=")
    return (base, int(count) if count.isdigit() else -1)


def section(py: str, c: str, go: str, machine: str, date: str) -> str:
    cm, gm = medians(c), medians(go)
    beside = beside_go(go)
    out = [BEGIN, f"## Latest: {machine}, {date}", "",
           "Python (`bench/python_bench.py`: medians over rounds, in brackets by each one's best round and, "
           "where given, the median of each round's ratio (within a round the two are timed milliseconds apart); "
           "streambridge over the fastest peer among CuPy, PyTorch and cuda.core, and over the C floor: the "
           "same operation in C over the driver API, `bench/driver_bench.c`, in the same run; and over "
           "those loops run inside the Python benchmark's process, on its streams and event, "
           "`bench/inproc.c`, where the driver is in the same state):", "",
           "| operation | spelling | streambridge ns | fastest peer, ns | every peer, ns | C floor ns "
           "| ratio to the fastest peer (best rounds; by round) | over the C floor | over C in the same process "
           "(best rounds; by round) | bar |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    out += [f"| {' | '.join(row)} |" for row in python_rows(py, cm)]
    cm.setdefault("WaitStream", cm.get("RecordWait", 0.0))  # the same two driver calls, in one crossing
    out += ["", "Go against the same loops in C (`bench/run.sh`: medians of its rounds; benchstat there gives "
            "the intervals and p-values), and against those loops run inside the Go benchmark's own process "
            "(`bench/inproc.c`), where the host and the driver are in the state Go's loops meet: "
            "`BenchmarkInProcessC` takes turns with Go's loop (`inprocTurn` calls each, a few milliseconds), and with the Raw benchmark's "
            "loop, the same driver calls through the trampoline with no streams layer (each ratio is the median "
            "of its rounds' time over C's in the same turns), and `BenchmarkInProcessCThroughput` likewise, n "
            "C threads then n goroutines, `inprocTurn` calls a thread each turn:", "",
            "| benchmark | C ns | Go ns | Go / C | C in Go's process ns | Go / C in its process "
            "| Raw / C in its process |",
            "|---|---|---|---|---|---|---|"]
    for name in sorted(set(cm) & set(gm), key=_by_count):
        c_ns, sides = beside.get(name, (None, {}))
        cells = [f"{c_ns:.1f}" if c_ns else ""] + [f"{sides[k]:.2f}" if k in sides else "" for k in ("go", "raw")]
        inproc = " | ".join(cells)
        out.append(f"| {name} | {cm[name]:.1f} | {gm[name]:.1f} | {gm[name] / cm[name]:.2f} | {inproc} |")
    if "relaxed" in beside.get("Query", (0, {}))[1]:
        relaxed = beside["Query"][1]["relaxed"]
        out += ["", f"In the same turns C's query with the thread's capture mode relaxed around it, as "
                f"streambridge's query is (issue 25: two `cuThreadExchangeStreamCaptureMode` calls), took "
                f"{relaxed:.2f} of C's bare query."]
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
