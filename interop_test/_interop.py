"""Helpers for the cross-framework tests."""

import importlib
import os
import subprocess
import sys

import pytest

REQUIRE_GPU = os.environ.get("STREAMBRIDGE_REQUIRE_GPU") == "1"


def framework(name):
    """The framework module; a missing one fails on a GPU machine that must have them."""
    if REQUIRE_GPU:
        return importlib.import_module(name)
    return pytest.importorskip(name)


def run_child(code, *args, timeout=180):
    """Runs Python code in a child process: (exit status, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr
