"""The README's Python programs as the tests read them, and what its first one prints: for
test_readme.py, and for the wheel's smoke test (scripts/smoke.py), which runs the first one
against an installed wheel. No pytest here: the smoke test's environment has only the wheel."""

import re

# What the README's first program prints on the software driver.
FIRST_OUTPUT = "the producer's work is done\nsim True True\n"


def python_blocks(text: str) -> list:
    """The ```python blocks of a Markdown text, in order."""
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)
