"""The README's first Python program, and the documentation's examples (docs/), run as
shown, on the software driver."""

import os
import pathlib
import re
import subprocess
import sys

import pytest
import readme_program

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The README, then the documentation's pages, in the order of the site (mkdocs.yml).
PAGES = [ROOT / "README.md"] + [ROOT / "docs" / page for page in re.findall(r"^\s*- [^:]+: (\S+\.md)$",
                                                                         (ROOT / "mkdocs.yml").read_text(), flags=re.M)
                                 if (ROOT / "docs" / page).exists()]
TEXT = "\n".join(page.read_text() for page in PAGES)


def python_blocks():
    """The ```python blocks of the README and the documentation, in order."""
    return readme_program.python_blocks(TEXT)


def test_every_page_of_the_documentation_is_on_the_site():
    assert sorted(p.name for p in PAGES[1:]) == sorted(p.name for p in (ROOT / "docs").glob("*.md"))


@pytest.mark.learned_layout  # its example wraps a bare handle
def test_the_first_program_runs_on_the_software_driver():
    first = python_blocks()[0]
    assert 'os.environ.setdefault("STREAMBRIDGE_DRIVER", "sim")' in first
    env = dict(os.environ, STREAMBRIDGE_DRIVER="sim")
    p = subprocess.run([sys.executable, "-c", first], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout == readme_program.FIRST_OUTPUT, p.stdout


@pytest.mark.learned_layout  # its example wraps a bare handle
def test_help_opens_with_an_example_that_runs():
    # help(streambridge) shows the package's docstring first: its example is a doctest.
    code = "import doctest, streambridge; r = doctest.testmod(streambridge); print(r.attempted, r.failed)"
    env = dict(os.environ, STREAMBRIDGE_DRIVER="sim")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    attempted, failed = map(int, p.stdout.split()[-2:])
    assert p.returncode == 0 and attempted >= 8 and failed == 0, p.stdout + p.stderr


@pytest.mark.learned_layout  # its example wraps a bare handle
def test_the_explain_example_prints_what_the_readme_shows():
    block = next(b for b in python_blocks() if "sb.explain(" in b)
    shown = re.search(r"^```text\n(.*?)^```$", TEXT.split(block, 1)[1], flags=re.S | re.M).group(1)
    env = dict(os.environ, STREAMBRIDGE_DRIVER="sim")
    p = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr

    def varying(text):  # handles and stream ids vary from run to run
        return re.sub(r"(handle      0x|stream id   )[0-9a-f]+", r"\1N", text)

    assert varying(p.stdout) == varying(shown)


def run_block(marker):
    """The output of the README's first Python block containing marker, run on the
    software driver; a failed run fails the test."""
    block = next(b for b in python_blocks() if marker in b)
    env = dict(os.environ, STREAMBRIDGE_DRIVER="sim")
    p = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_the_hand_over_example_runs():
    out = run_block("sb.hand_over(")
    assert out == "[\"the consumer's slow work\"] True\n", out


@pytest.mark.learned_layout  # its example wraps a bare handle
def test_the_borrowed_event_example_runs():
    out = run_block("sb.Event.from_handle(")
    assert out == "True True\nInvalidHandleError True\n", out


def test_the_captured_callback_example_runs():
    out = run_block("s.begin_capture()  # or a capture another framework began")
    assert out == "['replayed', 'replayed', 'replayed']\n", out
