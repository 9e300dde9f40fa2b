"""The README's GPU programs (torch and CuPy; a Go function of one's own on torch's data) run
as shown."""

import pathlib
import re
import subprocess
import sys

import pytest
from _interop import framework

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```$", README.read_text(), flags=re.S | re.M)


@pytest.mark.parametrize("index", [1, 2], ids=["torch and CuPy", "a Go function on torch's stream"])
def test_a_readme_gpu_program_runs(index):
    framework("torch"), framework("cupy")
    assert "cuda" in BLOCKS[index]
    p = subprocess.run([sys.executable, "-c", BLOCKS[index]], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
