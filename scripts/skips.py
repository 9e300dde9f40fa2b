"""The Go tests' skips, grouped by reason with a count each, from go test -json's events
(build/test.json): one line per reason where gotestsum would print one per test."""

import collections
import json
import re
import sys

output = collections.defaultdict(list)
skipped = []
for line in open(sys.argv[1] if len(sys.argv) > 1 else "build/test.json"):
    ev = json.loads(line)
    key = (ev.get("Package"), ev.get("Test"))
    if ev.get("Test") and ev.get("Action") == "output":
        output[key].append(ev["Output"])
    elif ev.get("Test") and ev.get("Action") == "skip":
        skipped.append(key)
reasons: collections.Counter = collections.Counter()
for key in skipped:
    said = [s.strip() for s in re.findall(r"\bSKIP: (.*)", "".join(output[key]))]  # an output line may come in pieces
    if said or "/" not in key[1]:  # a parent whose subtests all skipped says nothing of its own
        reasons[said[0] if said else "(no reason given)"] += 1
if reasons:
    print(f"skipped: {sum(reasons.values())} tests, by reason")
    for reason, n in reasons.most_common():
        print(f"  {n:4d}  {reason}")
