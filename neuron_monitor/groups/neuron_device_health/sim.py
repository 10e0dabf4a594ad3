"""The simulator's part for ``neuron_device_health`` (contract: sim/part.py): the driver's health status of each
device (driver >= 2.30.2, not on Inferentia 1).

Files, per device: ``<stats>/hardware/health_status/{unhealthy_components,healthcheck_heartbeat,hw_error_event}``
(``<stats>``: ``neuronN/stats``; layout ``regrouped``: ``neuronN/diagnostics/health_status/``); node family
``health``. The group also reads the ECC counters (part ``neuron_hw_counters``) and the power status (part
``neuron_device_telemetry``).

Commands: ``unhealthy`` / ``healthy`` (``device``, ``component``; ``healthy`` without a component clears all),
``hw_error_event`` (``device``, ``count``: health_status/hw_error_event grows). A device reset clears both.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from neuron_monitor.sim.part import Host, SimPart
from neuron_monitor.sim.tree import DeviceTree, InPlaceFile, ReopenedFile

# where health_status/ lives in a reorganized layout, relative to the device directory (else <stats>/hardware)
HEALTH_PARENT: dict[str, str] = {"regrouped": "diagnostics"}


class HealthNodes:
    """The group's files of one device (None where the driver or the tree has none)."""

    def __init__(self, device: DeviceTree) -> None:
        self.health: InPlaceFile | None = None
        self.hw_error_event: ReopenedFile | None = None
        ver, name = device.layout.ver, device.layout.name
        if not device.shape.has_ecc_files or ver < (2, 30, 2) or "health" in device.absent:
            return
        parent = f"{device.top}/{HEALTH_PARENT[name]}" if name in HEALTH_PARENT else f"{device.stats}/hardware"
        b = device.builder
        hs = b.make(f"{parent}/health_status")
        self.health = InPlaceFile(b.new(f"{hs}/unhealthy_components"), b"\n")
        b.write(f"{hs}/healthcheck_heartbeat", b"1\n")
        self.hw_error_event = ReopenedFile(b.new(f"{hs}/hw_error_event"), b"0\n")

    def close(self) -> None:
        if self.health is not None:
            self.health.close()


class HealthPart(SimPart):
    commands = ("unhealthy", "healthy", "hw_error_event")
    node_families = ("health",)

    def __init__(self, name: str, host: Host) -> None:
        super().__init__(name, host)
        self.unhealthy: dict[int, list[str]] = {}  # device -> components the driver reports unhealthy
        self.hw_error_events: dict[int, int] = {}  # device -> health_status/hw_error_event

    @classmethod
    def device_nodes(cls, device: DeviceTree) -> HealthNodes:
        return HealthNodes(device)

    def apply(self, kind: str, command: dict[str, Any], detail: dict[str, Any]) -> str:
        dev, error = self.device_of(command, detail)
        if error:
            return error
        nodes: HealthNodes = self.nodes(dev)
        if nodes.health is None or nodes.hw_error_event is None:
            return f"driver {self.host.layout.label} exposes no health status"
        if kind == "hw_error_event":
            self.hw_error_events[dev] = self.hw_error_events.get(dev, 0) + int(command.get("count", 1))
            nodes.hw_error_event.write(b"%d\n" % self.hw_error_events[dev])
            return ""
        comps = self.unhealthy.setdefault(dev, [])
        component = str(command.get("component", "hbm"))
        if kind == "unhealthy" and component not in comps:
            comps.append(component)
        elif kind == "healthy":
            comps[:] = [c for c in comps if c != component] if "component" in command else []
        detail.update(component=component, unhealthy=list(comps))
        nodes.health.write((",".join(comps) + "\n").encode())
        return ""

    def device_reset(self, device: int) -> None:
        self.hw_error_events[device] = 0
        self.unhealthy.pop(device, None)
        nodes: HealthNodes = self.nodes(device)
        if nodes.health is not None and nodes.hw_error_event is not None:
            nodes.health.write(b"\n")
            nodes.hw_error_event.write(b"0\n")

    def remove_nodes(self, device: int, family: str) -> None:
        nodes: HealthNodes = self.nodes(device)
        for f in (nodes.health, nodes.hw_error_event):
            if f is not None:
                with contextlib.suppress(OSError):
                    os.unlink(f.path)
                f.close()
        if nodes.health is not None:
            folder = os.path.dirname(nodes.health.path)
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, "healthcheck_heartbeat"))
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        nodes.health = nodes.hw_error_event = None

    def totals(self) -> dict[str, Any]:
        return {"unhealthy": {str(d): list(c) for d, c in self.unhealthy.items()}}


PART = HealthPart
