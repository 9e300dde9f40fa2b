"""Builds the streambridge wheel: the native module (Go, through gopy) and the package.

    python3 setup.py bdist_wheel -d dist                # for the interpreter running this
    STREAMBRIDGE_PY_INCLUDE="DIR DIR" STREAMBRIDGE_PY_TAG=cp312 \\
        python3 setup.py bdist_wheel -d dist            # for another CPython, from its headers

The Makefile's `wheel` and `wheel-cp312` targets do these.
"""

import os
import subprocess
import sysconfig

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution
from wheel.bdist_wheel import bdist_wheel

CROSS_TAG = os.environ.get("STREAMBRIDGE_PY_TAG")  # e.g. cp312


def target():
    """Header folders and extension suffix of the Python the wheel is for."""
    if CROSS_TAG:
        version = CROSS_TAG[2] + "." + CROSS_TAG[3:]
        return os.environ["STREAMBRIDGE_PY_INCLUDE"], f".cpython-{CROSS_TAG[2:]}-x86_64-linux-gnu.so", version
    paths = sysconfig.get_paths()
    include = " ".join({paths["include"], paths["platinclude"]})
    return include, sysconfig.get_config_var("EXT_SUFFIX"), None


class BuildNative(build_py):
    def run(self):
        include, suffix, _ = target()
        subprocess.check_call(["bash", "scripts/build-native.sh", include, suffix])
        super().run()


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


class Wheel(bdist_wheel):
    def get_tag(self):
        if CROSS_TAG:
            return CROSS_TAG, CROSS_TAG, "linux_x86_64"
        return super().get_tag()


setup(
    name="streambridge",
    version="0.1.0",
    description="CUDA streams shared safely between PyTorch, CuPy, cuda.core and Go",
    package_dir={"": "python"},
    packages=["streambridge", "streambridge._native"],
    package_data={"streambridge": ["py.typed"], "streambridge._native": ["*.so"]},
    python_requires=">=3.10",
    distclass=BinaryDistribution,
    cmdclass={"build_py": BuildNative, "bdist_wheel": Wheel},
)
