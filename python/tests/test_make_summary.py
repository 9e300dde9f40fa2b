"""scripts/summary.py, the closing summary of `make test`: its counts from a Go test event
stream and a pytest JUnit file like the ones the stages write, and its verdict."""

import importlib.util
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "summary.py"


def summary():
    spec = importlib.util.spec_from_file_location("make_summary", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_go_counts_every_test_and_groups_the_skips_by_reason(tmp_path):
    events = [
        {"Action": "pass", "Package": "p", "Test": "TestA"},
        {"Action": "fail", "Package": "p", "Test": "TestB/sub"},
        {"Action": "output", "Package": "p", "Test": "TestC", "Output": "    x_test.go:9: SKIP: no GPU here\n"},
        {"Action": "skip", "Package": "p", "Test": "TestC"},
        {"Action": "output", "Package": "p", "Test": "TestD", "Output": "    x_test.go:9: SKIP: no GPU"},
        {"Action": "output", "Package": "p", "Test": "TestD", "Output": " here\n"},  # a long line comes in pieces
        {"Action": "skip", "Package": "p", "Test": "TestD"},
        {"Action": "pass", "Package": "p"},  # a package's event, no test's
    ]
    path = tmp_path / "test.json"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\nnot json\n")
    passed, failed, skipped, reasons = summary().go_counts(str(path))
    assert (passed, failed, skipped) == (1, 1, 2)
    assert reasons == {"no GPU here": 2}


def test_pytest_counts_tell_skips_from_expected_failures(tmp_path):
    path = tmp_path / "junit.xml"
    path.write_text("""<testsuites><testsuite>
      <testcase name="a"/><testcase name="b"><failure message="x"/></testcase>
      <testcase name="c"><error message="y"/></testcase>
      <testcase name="d"><skipped type="pytest.skip" message="SKIP: needs two devices"/></testcase>
      <testcase name="e"><skipped type="pytest.xfail" message="refused by design"/></testcase>
    </testsuite></testsuites>""")
    passed, failed, skipped, xfailed, reasons = summary().pytest_counts(str(path))
    assert (passed, failed, skipped, xfailed) == (1, 2, 1, 1)
    assert reasons == {"needs two devices": 1}


def test_the_verdict_fails_on_any_stage_and_names_what_did_not_run(tmp_path):
    def run(*stages):
        return subprocess.run([sys.executable, str(SCRIPT), *stages], capture_output=True, text=True, cwd=tmp_path,
                              check=True).stdout
    every = ["deps:0:1", "check:0:1", "go-test:0:1", "typecheck:0:1", "pytest:0:1", "pytest-jax:0:1", "docs:0:1"]
    assert run(*every).rstrip().endswith("verdict: PASSED, in 0 min 7 s")
    out = run(*every[:2], "go-test:1:1", *every[3:])
    assert "go-test    FAILED" in out and "verdict: FAILED (go-test)" in out
    out = run("deps:2:1")
    assert "check      not run (deps failed)" in out and "verdict: FAILED (deps)" in out
