"""Device topology and the ``neuron_hardware_info`` object, from the driver's sysfs strings and a lookup per chip.

neuron-monitor's strings differ from the driver's (its ``neuron_device_version`` numbering is trn1 v2, inf2 v3,
trn2 v4, while sysfs says NDv2, NDv3, NDv3), so they come from a table keyed by the sysfs ``device_name`` (with
``arch_type`` as a fallback). Device memory has no sysfs file: it is a per-chip constant. The logical NeuronCore
config (LNC) comes from ``NEURON_LOGICAL_NC_CONFIG`` in our environment, else
``<root>/opt/aws/neuron/logical_nc_config``, else the chip's default (2 on Trn2/Trn3, 1 elsewhere). A value the
chip cannot take (``abc``, ``3``, 2 on a chip without LNC=2) is not used, and said once in the log: the cores
would otherwise be counted with an LNC the user did not ask for, without a word.
Inferred (no public source): the inf1 strings ("inferentia", "v1", "v1") and the trn3 ones ("trainium3", "v5",
"v4"/"v4d").
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import Any

from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.sysfs import DriverTree
from neuron_monitor.util.sanitize import sanitize

log = logging.getLogger("neuron_monitor.neuron.hardware")
_WARNED: set[tuple[str, str, int]] = set()  # (where, value, default) already said: once each, not per report

GIB = 1024**3


@dataclass(frozen=True)
class Chip:
    device_type: str
    device_version: str
    core_version: str  # with LNC=2 a "d" is appended ("v3d")
    memory: int
    default_lnc: int


CHIPS: dict[str, Chip] = {
    "Inferentia": Chip("inferentia", "v1", "v1", 8 * GIB, 1),
    "Inferentia2": Chip("inferentia2", "v3", "v2", 32 * GIB, 1),
    "Trainium1": Chip("trainium", "v2", "v2", 32 * GIB, 1),
    "Trainium2": Chip("trainium2", "v4", "v3", 96 * GIB, 2),
    "Trainium3": Chip("trainium3", "v5", "v4", 144 * GIB, 2),
}
_BY_ARCH = {("NDv1", ""): "Inferentia", ("NDv2", ""): "Trainium1", ("NDv3", "NCv2"): "Inferentia2",
            ("NDv3", "NCv3"): "Trainium2", ("NDv4", ""): "Trainium3"}  # fmt: skip
LNC_FILE = "opt/aws/neuron/logical_nc_config"


@dataclass(frozen=True)
class Topology:
    devices: tuple[int, ...]
    phys_cores: int  # physical NeuronCores per device
    lnc: int
    chip: Chip | None
    chip_name: str

    @property
    def logical_cores(self) -> int:
        return max(1, self.phys_cores // self.lnc)


def chip_for(device_name: str, nd_arch: str, nc_arch: str) -> tuple[str, Chip | None]:
    if device_name in CHIPS:
        return device_name, CHIPS[device_name]
    name = _BY_ARCH.get((nd_arch, nc_arch)) or _BY_ARCH.get((nd_arch, ""))
    return (name, CHIPS[name]) if name else (device_name or nd_arch, None)


def configured_lnc(root: RootFS, chip: Chip | None) -> int:
    """The logical NeuronCore config: the environment's, else the file's, else the chip's default (a value the chip
    cannot take is warned about once and not used)."""
    default = chip.default_lnc if chip else 1
    value = os.environ.get("NEURON_LOGICAL_NC_CONFIG", "").strip()
    where = "NEURON_LOGICAL_NC_CONFIG"
    if not value:
        where = f"<root>/{LNC_FILE}"
        try:
            m = re.search(r"NEURON_LOGICAL_NC_CONFIG[ \t]*=[ \t]*(\S*)", root.read_text(LNC_FILE))
            value = m.group(1) if m else ""
        except OSError:
            value = ""
    if not value:
        return default
    if value in ("1", "2") and (value == "1" or default == 2):
        return int(value)
    _warn_once(where, value, default)
    return default


def _warn_once(where: str, value: str, default: int) -> None:
    key = (where, value[:64], default)
    if key not in _WARNED:
        _WARNED.add(key)
        shown = sanitize(repr(value[:64]))
        log.warning("%s=%s is not a logical NeuronCore config this chip takes (1 or 2 on Trn2/Trn3, 1 elsewhere): "
                    "counting cores with the chip's default, %d", where, shown, default)  # fmt: skip


def read_topology(root: RootFS) -> Topology:
    """The devices present now and their core layout; OSError/ValueError when sysfs cannot be read."""
    tree = DriverTree(root)
    devices = tuple(tree.device_indexes())
    if not devices:
        return Topology((), 0, 1, None, "")
    first = devices[0]
    name, chip = chip_for(*tree.arch(first))
    phys = tree.phys_cores(first)
    lnc = configured_lnc(root, chip)
    if phys % lnc:
        lnc = 1
    return Topology(devices, phys, lnc, chip, name)


@dataclass(frozen=True)
class HardwareInfo:
    """The ``neuron_hardware_info`` object, typed; `as_report` gives it with AWS's keys, in AWS's order."""

    device_type: str = ""
    device_version: str = ""
    core_version: str = ""
    device_count: int = 0
    device_memory_size: int = 0
    cores_per_device: int = 0  # logical NeuronCores per device
    logical_core_config: int = 0  # LNC
    error: str = ""

    def as_report(self) -> dict[str, Any]:
        """The report's ``neuron_hardware_info`` object (a new dict)."""
        return {
            "neuron_device_type": self.device_type,
            "neuron_device_version": self.device_version,
            "neuroncore_version": self.core_version,
            "neuron_device_count": self.device_count,
            "neuron_device_memory_size": self.device_memory_size,
            "neuroncore_per_device_count": self.cores_per_device,
            "logical_neuroncore_config": self.logical_core_config,
            "error": self.error,
        }


def hardware_info(topo: Topology) -> HardwareInfo:
    """What ``neuron_hardware_info`` says about ``topo``, ``error`` filled when incomplete."""
    if not topo.devices:
        return HardwareInfo(error="no Neuron devices found (is the Neuron driver loaded?)")
    chip = topo.chip
    return HardwareInfo(
        device_type=chip.device_type if chip else topo.chip_name.lower(),
        device_version=chip.device_version if chip else "",
        core_version=(chip.core_version + ("d" if topo.lnc == 2 else "")) if chip else "",
        device_count=len(topo.devices),
        device_memory_size=chip.memory if chip else 0,
        cores_per_device=topo.logical_cores,
        logical_core_config=topo.lnc,
        error="" if chip else f"unknown Neuron device type {topo.chip_name!r}",
    )
