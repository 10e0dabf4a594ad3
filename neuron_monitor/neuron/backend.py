"""The seam between the daemon and the Neuron devices.

`open_backend(root)` returns a `NeuronBackend`: ``apps`` lists the Neuron applications (an `AppSource`) and
``hardware_info()`` returns the complete ``neuron_hardware_info`` object (with ``error`` filled when there is no
driver). This first version only detects whether the driver's sysfs tree exists; the device issue replaces it.
"""

from __future__ import annotations

from typing import Any

from neuron_monitor.groups.base import App
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.report import empty_hardware_info

SYSFS_CLASS = "sys/class/neuron_device"


class _NoApps:
    def snapshot(self) -> list[App]:
        return []

    def close(self) -> None:
        pass


class NeuronBackend:
    def __init__(self, root: RootFS) -> None:
        self.root = root
        self.apps = _NoApps()

    def hardware_info(self) -> dict[str, Any]:
        return empty_hardware_info("no Neuron devices found")

    def close(self) -> None:
        self.apps.close()


def open_backend(root: RootFS) -> NeuronBackend:
    return NeuronBackend(root)
