"""Reader of the Neuron driver's sysfs tree under the root (facts and public sources: docs/neuron-data.md).

`DriverTree(root)` finds the devices (``sys/class/neuron_device/neuronN``), their physical NeuronCores
(``neuron_coreK`` directories, else ``core_count``), architecture strings, the driver version
(``sys/module/neuron/version``) and where each device's ``stats`` directory lives (``neuronN/stats``, or
``neuronN/metrics/stats`` on drivers before 2.8). It returns plain values and raises OSError when a file is
missing; callers decide what that means.

The device listing is taken at most once a second while reports come faster (`DEVICE_LISTING_MAX_AGE`, within
collections the scheduler begins with its clock): a device the driver adds shows up in the report within a second,
and one that vanishes leaves the listing within a second, sooner when a reader saw its reads fail: the application
source drops the kept listing when listing a device's applications or opening a listed device fails
(`DriverTree.forget_listing`), so the next collection lists the devices again. At report periods of a second or
more every collection lists them, as before.
"""

from __future__ import annotations

import re

from neuron_monitor.host.rootfs import RootFS

CLASS_DIR = "sys/class/neuron_device"
DEVICES_DIR = "sys/devices/virtual/neuron_device"
_DEVICE_NAME = re.compile(r"neuron(\d+)$")
_CORE_NAME = re.compile(r"neuron_core(\d+)$")
DEVICE_LISTING_MAX_AGE = 1.0  # seconds a device listing is used again by later collections (see above)


def parse_driver_version(text: str) -> tuple[int, ...] | None:
    m = re.match(r"\s*(\d+(?:\.\d+)*)", text)
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


class DriverTree:
    def __init__(self, root: RootFS) -> None:
        self.root = root
        self._dirs = (CLASS_DIR, DEVICES_DIR)
        self._listed: tuple[list[str], tuple[int, ...]] = ([], ())  # the last listing and what it gave

    def device_indexes(self) -> tuple[int, ...]:
        """Indexes of the devices present now, ascending; () when the driver is not loaded."""
        for rel in self._dirs:
            try:
                names = self.root.listdir(rel, DEVICE_LISTING_MAX_AGE)  # shared with the other readers
            except OSError:
                continue
            if names == self._listed[0]:
                found = self._listed[1]
            else:
                found = tuple(sorted(int(m.group(1)) for n in names if (m := _DEVICE_NAME.match(n))))
                self._listed = (names, found)
            if found:
                return found
        return ()

    def forget_listing(self) -> None:
        """List the devices again at the next collection (a device's read failed: it may have gone)."""
        for rel in self._dirs:
            self.root.forget_listing(rel)

    def device_rel(self, index: int) -> str:
        return f"{CLASS_DIR}/neuron{index}"

    def stats_rel(self, index: int) -> str:
        base = self.device_rel(index)
        if self.root.is_dir(f"{base}/stats"):
            return f"{base}/stats"
        if self.root.is_dir(f"{base}/metrics/stats"):
            return f"{base}/metrics/stats"
        return f"{base}/stats"

    def phys_cores(self, index: int) -> int:
        try:
            names = self.root.listdir(self.device_rel(index))
        except OSError:
            names = []
        cores = sum(1 for n in names if _CORE_NAME.match(n))
        if cores:
            return cores
        return int(self.root.read_text(f"{self.device_rel(index)}/core_count").strip())

    def arch(self, index: int) -> tuple[str, str, str]:
        """(device_name, device arch_type, core arch_type), e.g. ("Trainium2", "NDv3", "NCv3"); "" if absent."""
        base = f"{self.device_rel(index)}/info/architecture"
        out = []
        for rel in (
            f"{base}/device_name",
            f"{base}/arch_type",
            f"{self.device_rel(index)}/neuron_core0/info/architecture/arch_type",
        ):
            try:
                out.append(self.root.read_text(rel).strip())
            except OSError:
                out.append("")
        return out[0], out[1], out[2]

    def driver_version(self) -> tuple[int, ...] | None:
        try:
            return parse_driver_version(self.root.read_text("sys/module/neuron/version"))
        except OSError:
            return None
