"""``python -m streambridge``: the driver, its devices, and what streambridge sees in the
current stream of each framework that can be imported (see streambridge.explain)."""

import argparse

from ._explain import report

argparse.ArgumentParser(
    prog="python -m streambridge",
    description="Prints the CUDA driver streambridge loaded (or why none), its devices, and what streambridge "
    "sees in the current stream of each framework that can be imported (PyTorch, CuPy, cuda.core, Numba). "
    "STREAMBRIDGE_DRIVER=sim selects the software driver.").parse_args()
print(report())
