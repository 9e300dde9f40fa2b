"""The build's own word to a Python it does not support: one line, before any C compiler or
setuptools of that Python can say something else."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_a_build_for_a_python_older_than_requires_python_says_so_in_one_line():
    floor = re.search(r'^requires-python\s*=\s*">=(\d+)\.(\d+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    major, minor = int(floor.group(1)), int(floor.group(2))
    # The Python just older than the floor, as it is on this machine (pyenv's), builds.
    older = sorted(Path.home().glob(f".pyenv/versions/{major}.{minor - 1}.*/bin/python3"))
    if not older:
        pytest.skip(f"no CPython {major}.{minor - 1} on this machine (pyenv's) to build with")
    r = subprocess.run([str(older[-1]), "setup.py", "--version"], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1
    assert r.stdout == ""
    assert r.stderr.strip() == (f"streambridge needs CPython {major}.{minor} or newer (requires-python in "
                                f"pyproject.toml); this build is for {major}.{minor - 1}")


def test_the_description_an_index_shows_links_to_the_repository_not_to_relative_paths():
    """The installed wheel's long description is the README with its links to the repository's
    own files made absolute (setup.py, readme_for_an_index): a package index has no docs/."""
    import importlib.metadata

    try:
        description = importlib.metadata.metadata("streambridge").json.get("description")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("streambridge is not installed from a wheel here (the package is on PYTHONPATH)")
    assert description and "streambridge" in description
    links = re.findall(r"\]\(([^)\s]+)\)", description)
    assert links, "the README's links"
    relative = [link for link in links if not re.match(r"[a-z]+:|#", link)]
    assert not relative, relative


def test_the_installed_wheel_declares_its_licence_and_carries_its_text():
    """The metadata names the licence (pyproject.toml) and the wheel carries LICENSE, the
    repository's, word for word."""
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution("streambridge")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("streambridge is not installed from a wheel here (the package is on PYTHONPATH)")
    assert dist.metadata["License"] == "Apache-2.0"
    assert "License :: OSI Approved :: Apache Software License" in dist.metadata.get_all("Classifier")
    carried = [f for f in dist.files or [] if f.name == "LICENSE"]
    assert carried, "LICENSE is not in the wheel"
    assert carried[0].read_text() == (ROOT / "LICENSE").read_text()


def test_importing_streambridge_on_a_free_threaded_python_leaves_the_gil_off():
    """The module declares it needs no GIL (module.inc, gopy-fixups' fifth fix): imported as a
    user imports it (no PYTHON_GIL in the environment), the GIL stays off and no
    RuntimeWarning says it was turned on."""
    import sysconfig

    if not sysconfig.get_config_var("Py_GIL_DISABLED"):
        pytest.skip("not a free-threaded CPython: there is a GIL to keep")
    env = {k: v for k, v in os.environ.items() if k != "PYTHON_GIL"}
    r = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c",
                        "import sys, streambridge; print(sys._is_gil_enabled())"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "False\n", r.stdout + r.stderr


def test_a_thread_counts_its_own_holds_apart_only_without_the_gil():
    """Without the GIL the thread that holds a stream or an event first counts its holds with
    plain stores, a close from another thread pairing with them through membarrier(2)
    (holds.inc, "A thread's own holds"); the module registers for it at import. Where the
    kernel refuses that (older than 4.14, a seccomp filter), every hold goes in the atomic
    word: correct, and slower, so this machine, CI's and the GPU machine's must allow it. With
    the GIL, holds are plain adds already, and there is nothing to count apart."""
    import sysconfig

    from streambridge import _core

    assert _core.core.own_holds() is bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
