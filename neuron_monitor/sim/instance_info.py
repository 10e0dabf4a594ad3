"""``instance_info`` for a simulated host: the simulated shape, a fake instance id marked as simulated, no network.

``neuron-monitor --simulate SHAPE`` uses this instead of the instance metadata service: a simulation never calls
169.254.169.254 (off EC2 that address either hangs or answers 403, and its answer would describe the wrong host).
"""

from __future__ import annotations

from typing import Any

from neuron_monitor.daemon.report import empty_instance_info

SIMULATED_INSTANCE_ID = "i-simulated"  # not a valid EC2 id (those are hex): no dashboard mistakes it for a real one


def simulated_instance_info(shape: str) -> dict[str, Any]:
    """The ``instance_info`` object of a simulated ``shape`` (e.g. "trn1.32xlarge")."""
    info = empty_instance_info("")
    info["instance_type"] = shape
    info["instance_id"] = SIMULATED_INSTANCE_ID
    info["instance_name"] = f"simulated {shape}"
    return info


class SimulatedInstanceInfo:
    """The `InstanceInfoSource` interface (start / get / close) answering the simulated shape at once."""

    def __init__(self, shape: str) -> None:
        self._info = simulated_instance_info(shape)

    def start(self) -> None:
        """Nothing to fetch."""

    def get(self) -> dict[str, Any]:
        return self._info

    def close(self) -> None:
        """Nothing to stop."""
