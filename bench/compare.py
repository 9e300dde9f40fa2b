#!/usr/bin/env python3
"""Reads Go benchmark output and bench/driver_bench.c output (one file or stdin) and prints
each Go benchmark beside the C loop of the same name: medians of the runs, and the ratio.

Usage: python3 bench/compare.py bench.log
"""
import re
import statistics
import sys

TARGETS = {  # the bars: Go / C
    "RecordWait": 1.3,
    "WaitStream": 1.3,
    "Query": 1.3,
    "LaunchEmpty": 1.1,
    "HostFuncLatency": 1.2,
}

LINE = re.compile(r"^Benchmark(C/)?(\w+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:.*?(\d+) allocs/op)?")


def main() -> None:
    text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
    go, c, allocs = {}, {}, {}
    for line in text.splitlines():
        m = LINE.match(line.strip())
        if not m:
            continue
        is_c, name, ns, n_allocs = m.groups()
        (c if is_c else go).setdefault(name, []).append(float(ns))
        if n_allocs is not None:
            allocs[name] = int(n_allocs)
    print(f"{'benchmark':<22}{'C ns/op':>10}{'Go ns/op':>10}{'raw ns/op':>11}{'no-ctx ns':>11}{'Go/C':>7}{'target':>10}{'allocs':>8}")
    c["WaitStream"] = c.get("RecordWait", [])  # the same two driver calls, one crossing
    for name in ["RecordWait", "WaitStream", "Query", "EventCreateClose", "LaunchEmpty", "HostFuncLatency"]:
        if name not in go or name not in c:
            print(f"{name:<22} missing (go: {name in go}, c: {name in c})")
            continue
        g, cc = statistics.median(go[name]), statistics.median(c[name])
        raw = statistics.median(go[name + "Raw"]) if name + "Raw" in go else None
        noctx = go.get(name + "NoContext")
        target = TARGETS.get(name)
        verdict = "" if target is None else (f"<={target}" + (" ok" if g / cc <= target else " MISS"))
        raw_s = f"{raw:.0f}" if raw is not None else "-"
        noctx_s = f"{statistics.median(noctx):.0f}" if noctx else "-"
        print(f"{name:<22}{cc:>10.0f}{g:>10.0f}{raw_s:>11}{noctx_s:>11}{g / cc:>7.2f}{verdict:>10}{allocs.get(name, '-'):>8}")


if __name__ == "__main__":
    main()
