"""The simulator's part for ``neuron_hw_counters`` (contract: sim/part.py): the driver's ECC counters of each
device (not on Inferentia 1).

Files, per device: ``<stats>/hardware/{mem,sram}_ecc_uncorrected``, ``mem_ecc_repairable_uncorrected`` (driver
>= 2.23) and ``{mem,sram}_ecc_corrected`` (driver >= 2.30), ``<stats>`` being ``neuronN/stats`` (``metrics/stats``
before 2.8; layout ``regrouped``: ``neuronN/counters/hardware/``); node family ``ecc``. The files hold the count
modulo 2^16, as the driver prints the firmware's 16-bit field. Random corrected events arrive at ``ecc_rate`` per
device per second (option; drivers with the corrected counters only). The neuron_device_health and
neuron_device_telemetry groups read these files too.

Commands: ``ecc_uncorrected`` / ``ecc_corrected`` (``device``, ``count``, ``memory``: "mem" or "sram"),
``ecc_repairable`` (``device``, ``count``). A device reset sets every count to 0.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from neuron_monitor.sim.part import Host, SimPart
from neuron_monitor.sim.tree import DeviceTree, InPlaceFile

REPAIRABLE = "mem_ecc_repairable_uncorrected"
# where hardware/ lives in a reorganized layout, relative to the device directory (else below <stats>)
HARDWARE_PARENT: dict[str, str] = {"regrouped": "counters"}


class EccNodes:
    """The ECC files of one device, by counter name ({} where the driver or the tree has none)."""

    def __init__(self, device: DeviceTree) -> None:
        self.ecc: dict[str, InPlaceFile] = {}
        ver, layout = device.layout.ver, device.layout.name
        if not device.shape.has_ecc_files or "ecc" in device.absent:
            return
        parent = f"{device.top}/{HARDWARE_PARENT[layout]}" if layout in HARDWARE_PARENT else device.stats
        hw = device.builder.make(f"{parent}/hardware")
        names = ["mem_ecc_uncorrected", "sram_ecc_uncorrected"]
        if ver >= (2, 23):
            names.append(REPAIRABLE)
        if ver >= (2, 30):
            names += ["mem_ecc_corrected", "sram_ecc_corrected"]
        self.ecc = {n: InPlaceFile(device.builder.new(f"{hw}/{n}"), b"0\n") for n in names}

    def close(self) -> None:
        for f in self.ecc.values():
            f.close()


class HwCountersPart(SimPart):
    commands = ("ecc_uncorrected", "ecc_corrected", "ecc_repairable")
    node_families = ("ecc",)

    def __init__(self, name: str, host: Host) -> None:
        super().__init__(name, host)
        self.ecc_rate = float(host.options.get("ecc_rate", 0.02))  # corrected ECC events per device per second
        self.ecc: list[dict[str, int]] = [dict.fromkeys(self.nodes(d).ecc, 0) for d in range(len(host.devices))]

    @classmethod
    def device_nodes(cls, device: DeviceTree) -> EccNodes:
        return EccNodes(device)

    def step(self, now: float, dt: float) -> None:
        if self.ecc_rate <= 0:
            return
        rng = self.host.rng
        for dev, counts in enumerate(self.ecc):
            eligible = "mem_ecc_corrected" in counts and dev not in self.host.removed_devices
            if eligible and rng.random() < self.ecc_rate * dt:
                self.add(dev, rng.choice(("mem_ecc_corrected", "sram_ecc_corrected")), 1)

    def add(self, dev: int, name: str, k: int) -> None:
        if name not in self.ecc[dev] or dev in self.host.removed_devices:
            return
        self.ecc[dev][name] += k
        # the firmware keeps 16-bit counts; the driver prints the register field
        self.nodes(dev).ecc[name].write(b"%d\n" % (self.ecc[dev][name] & 0xFFFF))

    def apply(self, kind: str, command: dict[str, Any], detail: dict[str, Any]) -> str:
        count = int(command.get("count", 1))
        if kind == "ecc_repairable":
            dev, error = self.device_of(command, detail)
            if error:
                return error
            name = REPAIRABLE
        else:
            dev = int(command.get("device", 0))
            name = f"{command.get('memory', 'mem')}_ecc_{'uncorrected' if kind == 'ecc_uncorrected' else 'corrected'}"
            detail.update(device=dev)
        if not 0 <= dev < len(self.ecc) or name not in self.ecc[dev]:
            return f"device {dev} has no {name}"
        self.add(dev, name, count)
        detail.update(counter=name)
        return ""

    def device_reset(self, device: int) -> None:
        files = self.nodes(device).ecc
        for name in self.ecc[device]:
            self.ecc[device][name] = 0
            files[name].write(b"0\n")

    def remove_nodes(self, device: int, family: str) -> None:
        nodes: EccNodes = self.nodes(device)
        for f in nodes.ecc.values():
            with contextlib.suppress(OSError):
                os.unlink(f.path)
            f.close()
        for f in list(nodes.ecc.values())[:1]:  # hardware/ goes too when nothing else is in it
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(f.path))
        nodes.ecc = {}
        self.ecc[device] = {}

    def totals(self) -> dict[str, Any]:
        return {"ecc": {str(d): dict(c) for d, c in enumerate(self.ecc)}}


PART = HwCountersPart
