"""The Neuron driver's sysfs nodes the project reads, each defined once (facts and sources: docs/neuron-data.md).

A node is identified by its file (or directory) name and the directories right above it that say what it is, its
*family*: ``hardware/mem_ecc_uncorrected``, ``power/utilization``, ``health_status/unhealthy_components``. Where
the driver puts it under the device's directory (or, for a per-core node, under the core's ``neuron_coreK``
directory) is not part of its identity: the known layouts below say where drivers have put it so far, and
`neuron_monitor.neuron.discovery` finds it anywhere else (a driver that reorganized its tree), refusing to guess
when two places match.

Known layouts, tried first and in this order (a device uses the first whose stats directory exists):

- ``stats``: ``neuronN/stats/<known>`` and ``neuronN/neuron_coreK/stats/<known>`` (drivers 2.8 and later);
- ``metrics``: ``neuronN/metrics/stats/<known>`` and ``neuronN/metrics/neuron_coreK/stats/<known>`` (drivers
  before 2.8, whose tree sat under ``metrics/``).

The simulator's invented layouts (``neuron-monitor-sim --driver``) are deliberately not known here: the readers
must discover them as they would discover a real driver's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

CORE_DIR: Final = re.compile(r"neuron_core(\d+)$")


@dataclass(frozen=True, slots=True)
class Node:
    """One driver node.

    ``family``: its name in reports and errors (``found`` of the report's ``sources``); ``match``: the identity the
    search matches, the trailing path components (the family itself, except for directories whose entries the
    reader lists: ``status`` for ``status/<counter>/total``); ``known``: its path below the known layouts' stats
    directory; ``core``: it lives below each ``neuron_coreK`` rather than on the device; ``directory``: it is a
    directory (of categories or counters), else a regular file; ``in_stats``: ``known`` is below the stats
    directory (else below the device's, or the core's, own directory: ``info/architecture/...``)."""

    family: str
    match: tuple[str, ...]
    known: str
    core: bool = False
    directory: bool = False
    in_stats: bool = True


def _file(family: str, known: str | None = None, core: bool = False) -> Node:
    return Node(family, tuple(family.split("/")), known or family, core)


def _info(family: str, core: bool = False) -> Node:
    return Node(family, tuple(family.split("/")), f"info/{family}", core, in_stats=False)


def _dir(family: str, match: str, known: str, core: bool = False) -> Node:
    return Node(family, tuple(match.split("/")), known, core, directory=True)


# --- per device ---------------------------------------------------------------------------------------------------
MEM_ECC_UNCORRECTED: Final = _file("hardware/mem_ecc_uncorrected")
SRAM_ECC_UNCORRECTED: Final = _file("hardware/sram_ecc_uncorrected")
MEM_ECC_CORRECTED: Final = _file("hardware/mem_ecc_corrected")
SRAM_ECC_CORRECTED: Final = _file("hardware/sram_ecc_corrected")
MEM_ECC_REPAIRABLE: Final = _file("hardware/mem_ecc_repairable_uncorrected")
UNHEALTHY_COMPONENTS: Final = _file("health_status/unhealthy_components", "hardware/health_status/unhealthy_components")
HW_ERROR_EVENT: Final = _file("health_status/hw_error_event", "hardware/health_status/hw_error_event")
POWER_UTILIZATION: Final = _file("power/utilization")
DEVICE_NAME: Final = _info("architecture/device_name")
DEVICE_ARCH: Final = _info("architecture/arch_type")
HOST_MEM: Final = _dir("memory_usage/host_mem/<category>", "memory_usage/host_mem", "memory_usage/host_mem")

# --- per physical NeuronCore ---------------------------------------------------------------------------------------
CORE_BUSY: Final = _file("nc_time_in_use/total", "other_info/nc_time_in_use/total", core=True)
CORE_DEVICE_MEM: Final = _dir(
    "memory_usage/device_mem/<category>", "memory_usage/device_mem", "memory_usage/device_mem", core=True
)
CORE_STATUS: Final = _dir("status/<counter>/total", "status", "status", core=True)
CORE_ARCH: Final = _info("architecture/arch_type", core=True)

ECC_BY_COUNTER: Final = {
    "mem_ecc_corrected": MEM_ECC_CORRECTED,
    "mem_ecc_uncorrected": MEM_ECC_UNCORRECTED,
    "sram_ecc_uncorrected": SRAM_ECC_UNCORRECTED,
    "sram_ecc_corrected": SRAM_ECC_CORRECTED,
    "mem_ecc_repairable_uncorrected": MEM_ECC_REPAIRABLE,
}


@dataclass(frozen=True, slots=True)
class KnownLayout:
    """Where a driver generation put the tree: the device's stats directory and the directory holding the cores,
    both below ``neuronN`` ("" for ``neuronN`` itself)."""

    name: str
    stats: str
    cores: str

    def device_path(self, device_rel: str, node: Node) -> str:
        return f"{device_rel}/{self.stats}/{node.known}" if node.in_stats else f"{device_rel}/{node.known}"

    def core_dir(self, device_rel: str, core: int) -> str:
        return f"{device_rel}/{self.cores}/neuron_core{core}" if self.cores else f"{device_rel}/neuron_core{core}"

    def core_path(self, device_rel: str, core: int, node: Node) -> str:
        if not node.in_stats:  # a core's info directory stays beside the device's (drivers before 2.8 too)
            return f"{device_rel}/neuron_core{core}/{node.known}"
        return f"{self.core_dir(device_rel, core)}/stats/{node.known}"


KNOWN_LAYOUTS: Final = (KnownLayout("stats", "stats", ""), KnownLayout("metrics", "metrics/stats", "metrics"))
