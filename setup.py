"""The parts of the wheel's build that pyproject.toml does not declare: the packages, the native module
(Go, through gopy: scripts/build-native.sh) built before the package, for the interpreter
running the build or, cross-built from another CPython's headers, for that one:

    python3 -m pip wheel . --no-build-isolation --no-deps -w dist          # make wheel
    STREAMBRIDGE_PY_INCLUDE="DIR DIR" STREAMBRIDGE_PY_TAG=cp312 \\
        python3 -m pip wheel . --no-build-isolation --no-deps -w dist      # make wheel-cp312
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
    package_dir={"": "python"},
    packages=["streambridge", "streambridge._native"],
    package_data={"streambridge": ["py.typed", "*.pyi"], "streambridge._native": ["*.so", "*.pyi"]},
    distclass=BinaryDistribution,
    cmdclass={"build_py": BuildNative, "bdist_wheel": Wheel},
)
