"""The GPU programs of the README and docs/ (torch and CuPy; a Go function of one's own on
torch's data) run as shown."""

import pathlib
import re
import subprocess
import sys

import pytest
from _interop import framework

ROOT = pathlib.Path(__file__).resolve().parents[1]
TEXT = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
# The programs of the README and the documentation that need a GPU: those that use torch.
ALL = re.findall(r"^```python\n(.*?)^```$", TEXT, flags=re.S | re.M)
BLOCKS = [b for b in ALL if "torch" in b and "import jax" not in b]
JAX_BLOCKS = [b for b in ALL if "import jax" in b]  # the README's and docs/jax.md's


def test_the_readme_has_its_two_gpu_programs():
    assert len(BLOCKS) == 2, "torch and CuPy; a Go function on torch's stream"


@pytest.mark.parametrize("index", [0, 1], ids=["torch and CuPy", "a Go function on torch's stream"])
def test_a_readme_gpu_program_runs(index):
    framework("torch"), framework("cupy")
    p = subprocess.run([sys.executable, "-c", BLOCKS[index]], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_jax_programs_run():
    framework("torch"), framework("jax")
    assert len(JAX_BLOCKS) == 2
    for block in JAX_BLOCKS:
        p = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
