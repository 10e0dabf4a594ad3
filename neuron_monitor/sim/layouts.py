"""The driver the simulator imitates: a version, and the layout of its sysfs tree.

``--driver`` (and the ``driver`` option of `TemporarySimulator`) takes either a plain version, which keeps the
layout of that version (``2.30.2.0``, the default; ``2.24.7.0``; before 2.8 the stats live under ``metrics/``),
or the name of a *reorganized* layout. The Neuron driver 2.31 and later reorganized its sysfs tree and moved
several nodes to new paths, not backwards compatible; which nodes moved is not public (the Neuron sysfs user
guide of SDK 2.33.0). The reorganized layouts here are the simulator's own inventions, made to test readers that
find a node by its name and the directories right above it (``hardware/mem_ecc_uncorrected``,
``power/utilization``, ``status/success/total``, ``memory_usage/host_mem/tensors/total``,
``health_status/unhealthy_components``): those tails are kept, only their ancestors move. They imitate no real
driver. The base device tree (sim/tree.py) and each group's simulator part (``groups/<name>/sim.py``) decide
where their own nodes go for a layout name; this module only names the layouts and their versions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from neuron_monitor.sim.shapes import Shape

STANDARD = ""  # the layout a plain version has always had


@dataclass(frozen=True)
class Reorganized:
    """A reorganized layout: the driver version it writes to ``sys/module/neuron/version`` and what moved."""

    version: str
    moves: str


# name -> the reorganized layout; where each node lives: docs/neuron-data.md ("Simulated driver layouts")
REORGANIZED: dict[str, Reorganized] = {
    "moved-cores": Reorganized(
        "2.31.0.0", "each neuron_coreK directory (its info/ and stats/) moved under neuronN/cores/"
    ),
    "regrouped": Reorganized(
        "2.32.0.0",
        "the ECC counters' hardware/ directory moved to neuronN/counters/hardware/, health_status/ to "
        "neuronN/diagnostics/health_status/, power/ to neuronN/telemetry/power/",
    ),
}
_VERSION = re.compile(r"\d+(\.\d+)*$")


@dataclass(frozen=True)
class DriverLayout:
    """The imitated driver: ``name`` is a key of `REORGANIZED`, or `STANDARD` for a plain version's layout."""

    version: str
    name: str = STANDARD

    @property
    def ver(self) -> tuple[int, ...]:
        """The version as numbers, for comparisons such as ``ver >= (2, 30)``."""
        return driver_tuple(self.version)

    @property
    def label(self) -> str:
        """What ``--driver`` was: the layout's name, or the version."""
        return self.name or self.version


def driver_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def default_driver(shape: Shape) -> str:
    return "2.24.7.0" if shape.nd_arch == "NDv1" else "2.30.2.0"


def driver_layout(value: str | DriverLayout | None, shape: Shape) -> DriverLayout:
    """The driver a ``--driver`` value names: None or "" is the shape's default version; a version (digits and
    dots) keeps its layout; a layout name gives that layout at its version. Anything else: ValueError."""
    if isinstance(value, DriverLayout):
        return value
    if not value:
        return DriverLayout(default_driver(shape))
    if value in REORGANIZED:
        return DriverLayout(REORGANIZED[value].version, value)
    if _VERSION.match(value):
        return DriverLayout(value)
    known = ", ".join(REORGANIZED)
    raise ValueError(f"driver {value!r}: neither a version (e.g. 2.30.2.0) nor a layout ({known})")
