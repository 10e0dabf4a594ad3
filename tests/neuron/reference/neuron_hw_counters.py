"""System group ``neuron_hw_counters``: ECC events per Neuron device over the period.

Reads ``stats/hardware/{mem,sram}_ecc_{corrected,uncorrected}`` of each device in the driver's sysfs tree
(kept descriptors, re-read at offset 0). The driver prints cumulative firmware counts (16-bit fields), so this
group reports per-period counts: the change since its previous collection (modulo 2^16 when a count wrapped),
the first period counting from the baseline taken at start. That is what AWS's exporter assumes when it adds the
values up. Devices without the files (Inf1, drivers before 2.30 for the corrected counts) leave out what is
missing and say so in ``error``; nothing here raises for a missing device or file.
"""

from __future__ import annotations

from typing import Any

from neuron_monitor.groups.base import SystemGroup
from neuron_monitor.host.rootfs import KeptFile, RootFS
from neuron_monitor.neuron.sysfs import DriverTree
from neuron_monitor.util.errors import GroupError

COUNTERS: tuple[str, ...] = ("mem_ecc_corrected", "mem_ecc_uncorrected", "sram_ecc_uncorrected", "sram_ecc_corrected")
_WRAP = 1 << 16


class NeuronHwCounters(SystemGroup):
    type_name = "neuron_hw_counters"

    def __init__(self, root: RootFS) -> None:
        super().__init__(root)
        self.tree = DriverTree(root)
        self._files: dict[tuple[int, str], KeptFile | None] = {}
        self._prev: dict[tuple[int, str], int] = {}

    def _file(self, device: int, name: str) -> KeptFile | None:
        key = (device, name)
        if key not in self._files:
            path = self.root.path(f"{self.tree.stats_rel(device)}/hardware/{name}")
            self._files[key] = KeptFile(path) if path.exists() else None
        return self._files[key]

    def _read_all(self) -> tuple[dict[tuple[int, str], int], list[int], list[str]]:
        values: dict[tuple[int, str], int] = {}
        missing: dict[str, list[int]] = {}
        devices = self.tree.device_indexes()
        for device in devices:
            for name in COUNTERS:
                f = self._file(device, name)
                if f is None:
                    missing.setdefault(name, []).append(device)
                    continue
                try:
                    values[(device, name)] = int(f.read().strip() or b"0")
                except (OSError, ValueError):
                    self._files.pop((device, name), None)  # look again next time (device reset or gone)
                    missing.setdefault(name, []).append(device)
        gone = {d for d, _ in self._files} - set(devices)
        for key in [k for k in self._files if k[0] in gone]:
            f = self._files.pop(key)
            if f is not None:
                f.close()
        errors = [
            f"{name} not exposed by the driver for neuron_device {_ranges(devs)}" for name, devs in missing.items()
        ]
        return values, devices, errors

    def prime(self) -> None:
        values, _, _ = self._read_all()
        self._prev = values

    def collect(self) -> dict[str, Any]:
        values, devices, errors = self._read_all()
        if not devices:
            raise GroupError("no Neuron devices found (is the Neuron driver loaded?)")
        out = []
        for device in devices:
            entry: dict[str, Any] = {"neuron_device_index": device}
            for name in COUNTERS:
                cur = values.get((device, name))
                prev = self._prev.get((device, name), cur)
                if cur is None or prev is None:
                    continue  # not read: left out, never 0
                elif cur >= prev:
                    entry[name] = cur - prev
                else:
                    entry[name] = (cur - prev) % _WRAP if prev < _WRAP else cur  # wrapped, or reset
            out.append(entry)
        self._prev = values
        body: dict[str, Any] = {"neuron_devices": out}
        if errors:
            body["error"] = "; ".join(errors)
        return body

    def close(self) -> None:
        for f in self._files.values():
            if f is not None:
                f.close()
        self._files.clear()


def _ranges(devices: list[int]) -> str:
    parts: list[str] = []
    start = prev = devices[0]
    for d in [*devices[1:], None]:  # type: ignore[list-item]
        if d is not None and d == prev + 1:
            prev = d
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if d is not None:
            start = prev = d
    return ",".join(parts)


GROUP = NeuronHwCounters
