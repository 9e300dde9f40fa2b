"""The closing summary of `make test` (scripts/make-test.sh): each stage's result and time,
what ran on which driver with its counts (the Go tests from build/test.json and
build/go-more.txt, the Python tests from pytest's JUnit files), skips by reason, and the
verdict.

    python3 scripts/summary.py STAGE:STATUS:SECONDS...
"""

import collections
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

WHAT = {
    "deps": "what the build needs (scripts/deps.sh)",
    "check": "gofmt, go vet, the core built without cgo",
    "go-test": "the Go tests",
    "typecheck": "mypy --strict",
    "pytest": "the wheel built and installed in a fresh venv, the Python tests",
    "pytest-jax": "streambridge.jax with JAX installed (its CPU backend)",
    "docs": "the documentation site, warnings as errors",
}

# Each pytest stage's results (its --junitxml files), a line each.
PYTEST_RESULTS = {
    "pytest": [("build/pytest-sim.xml", "python/tests, software driver"),
               ("build/pytest-unlearnable.xml", "python/tests, a layout that cannot be learned, one device")],
    "pytest-jax": [("build/pytest-jax.xml", "python/tests/test_jax.py, JAX's CPU backend")],
}


def go_counts(path="build/test.json"):
    """(passed, failed, skipped, skip reasons) over every test and subtest, as gotestsum counts."""
    if not os.path.exists(path):
        return None
    counts, output, skipped = collections.Counter(), collections.defaultdict(list), []
    for line in open(path):
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if not ev.get("Test"):
            continue
        key = (ev.get("Package"), ev["Test"])
        if ev.get("Action") == "output":
            output[key].append(ev["Output"])
        elif ev.get("Action") in ("pass", "fail", "skip"):
            counts[ev["Action"]] += 1
            if ev["Action"] == "skip":
                skipped.append(key)
    reasons = collections.Counter()
    for key in skipped:
        said = re.findall(r"\bSKIP: (.*)", "".join(output[key]))  # an output line may come in pieces
        if said or "/" not in key[1]:
            reasons[said[0].strip() if said else "(no reason given)"] += 1
    return counts["pass"], counts["fail"], counts["skip"], reasons


def pytest_counts(path):
    """(passed, failed, skipped, xfailed, skip reasons) from a pytest JUnit file."""
    if not os.path.exists(path):
        return None
    passed = failed = skipped = xfailed = 0
    reasons = collections.Counter()
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif (skip := case.find("skipped")) is not None:
            if skip.get("type") == "pytest.xfail":
                xfailed += 1
            else:
                skipped += 1
                reasons[re.sub(r"^SKIP: ", "", skip.get("message", "")).strip() or "(no reason given)"] += 1
        else:
            passed += 1
    return passed, failed, skipped, xfailed, reasons


def reasons_lines(reasons, indent="      "):
    return [f"{indent}{n:4d} skipped: {reason[:150]}" for reason, n in reasons.most_common()]


def main():
    stages = [arg.split(":") for arg in sys.argv[1:]]
    failed = [name for name, status, _ in stages if status != "0"]
    total = sum(int(seconds) for _, _, seconds in stages)
    lines = ["", "== make test: summary"]
    for name, status, seconds in stages:
        lines.append(f"  {name:<10} {'ok' if status == '0' else 'FAILED':<7} {int(seconds):4d} s  {WHAT.get(name, '')}")
        if name == "go-test":
            go = go_counts()
            if go:
                passed, fails, skips, reasons = go
                lines.append(f"      every package, race detector, shuffled, on the software driver and the real one "
                             f"where it loads: {passed} passed, {fails} failed, {skips} skipped")
                lines += reasons_lines(reasons)
            if os.path.exists("build/go-more.txt"):
                lines += [f"      {line.strip()}" for line in open("build/go-more.txt") if "every package" not in line]
        for path, label in PYTEST_RESULTS.get(name, ()):
            counts = pytest_counts(path)
            if counts:
                passed, fails, skips, xfails, reasons = counts
                lines.append(f"      {label}: {passed} passed, {fails} failed, {skips} skipped, {xfails} xfailed "
                             f"(refused by design)")
                lines += reasons_lines(reasons)
        if name == "pytest":
            lines.append("      the real driver's Python half (interop_test/, the frameworks): on a GPU machine, "
                         "scripts/gpu-check.sh")
    ran = {name for name, _, _ in stages}
    lines += [f"  {name:<10} not run (deps failed)" for name in WHAT if name not in ran]
    verdict = "PASSED" if not failed and len(ran) == len(WHAT) else f"FAILED ({', '.join(failed) or 'not every stage ran'})"
    lines.append(f"verdict: {verdict}, in {total // 60} min {total % 60} s")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
