"""Driver layouts for tests: a simulated tree whose nodes are moved elsewhere below each device's directory (file
names and defining parents kept), the way a driver that reorganized its sysfs tree would put them.

`relayout(root, moves)` renames, below every ``sys/devices/virtual/neuron_device/neuronN``, each path of ``moves``
(``{"stats/hardware": "stats/counters/hardware"}``; ``{core}`` in both stands for each ``neuron_coreK``). A renamed
file keeps its inode, so the simulator's kept descriptors still write the moved files."""

from __future__ import annotations

import os
from pathlib import Path

from neuron_monitor.sim.shapes import get_shape
from neuron_monitor.sim.tree import DeviceTree, write_host_files

DEVICES = "sys/devices/virtual/neuron_device"

# Two reorganizations of our own (not known to the readers: they must be discovered)
CORES_MOVED = {"neuron_core{core}": "cores/neuron_core{core}"}
REGROUPED = {
    "stats/hardware": "stats/counters/hardware",
    "stats/power": "telemetry/power",
    "stats/memory_usage": "telemetry/memory_usage",
    "neuron_core{core}/stats/other_info": "neuron_core{core}/stats/activity/other_info",
    "neuron_core{core}/stats/status": "neuron_core{core}/exec/status",
}
LAYOUTS: dict[str, dict[str, str]] = {"today": {}, "cores_moved": CORES_MOVED, "regrouped": REGROUPED}


def relayout(root: Path, moves: dict[str, str]) -> None:
    """Apply ``moves`` below every device's directory of the tree at ``root``."""
    top = root / DEVICES
    for device in sorted(top.iterdir()):
        cores = sorted(p.name[len("neuron_core") :] for p in device.iterdir() if p.name.startswith("neuron_core"))
        for src, dst in moves.items():
            for core in cores if "{core}" in src else [""]:
                a, b = device / src.format(core=core), device / dst.format(core=core)
                if a.exists():
                    os.makedirs(b.parent, exist_ok=True)
                    os.rename(a, b)


def build(root: Path, shape_name: str, driver: str, moves: dict[str, str] | None = None) -> list[DeviceTree]:
    """A simulated host at ``root``, its device trees moved by ``moves``."""
    shape = get_shape(shape_name)
    write_host_files(root, shape, driver, shape.lnc)
    devs = [DeviceTree(root, shape, i, driver) for i in range(shape.devices)]
    if moves:
        relayout(root, moves)
    return devs
