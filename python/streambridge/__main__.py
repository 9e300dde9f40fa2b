"""``python -m streambridge``: the driver, its devices, and what streambridge sees in the
current stream of each framework that can be imported (see streambridge.explain)."""

from ._explain import report

print(report())
