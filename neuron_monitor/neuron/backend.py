"""The seam between the daemon and the Neuron devices.

`open_backend(root)` returns a `NeuronBackend`: ``apps`` lists the Neuron applications (a `NeuronAppSource`,
see apps.py) and ``hardware_info()`` returns the complete ``neuron_hardware_info`` object, with ``error`` filled
when there is no driver. Both read everything below the root; on a real host the per-process data comes from
the driver's ioctls and read-only mappings of ``/dev/neuronN``, under the simulator from the files it writes.
"""

from __future__ import annotations

from typing import Any

from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.apps import NeuronAppSource
from neuron_monitor.neuron.hardware import HardwareInfo, hardware_info, read_topology


class NeuronBackend:
    def __init__(self, root: RootFS) -> None:
        self.root = root
        self.apps = NeuronAppSource(root)

    def hardware_info(self) -> dict[str, Any]:
        try:
            return hardware_info(read_topology(self.root)).as_report()
        except (OSError, ValueError) as e:
            return HardwareInfo(error=f"reading the Neuron driver's sysfs tree failed: {e}").as_report()

    def close(self) -> None:
        self.apps.close()


def open_backend(root: RootFS) -> NeuronBackend:
    return NeuronBackend(root)
