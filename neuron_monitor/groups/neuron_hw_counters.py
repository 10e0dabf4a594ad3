"""System group ``neuron_hw_counters``: ECC events per Neuron device over the period.

Reads ``stats/hardware/{mem,sram}_ecc_{corrected,uncorrected}`` of each device in the driver's sysfs tree
(kept descriptors, re-read at offset 0). The driver prints cumulative firmware counts (16-bit fields), so this
group reports per-period counts: the change since its previous collection (modulo 2^16 when a count wrapped),
the first period counting from the baseline taken at start. That is what AWS's exporter assumes when it adds the
values up. Devices without the files (Inf1, drivers before 2.30 for the corrected counts) report 0 for what is
missing and say so in ``error``; nothing here raises for a missing device or file.
"""

from __future__ import annotations

from typing import Any

from neuron_monitor.groups.base import GroupError, SystemGroup
from neuron_monitor.host.rootfs import KeptFile, RootFS
from neuron_monitor.neuron.sysfs import DriverTree

COUNTERS: tuple[str, ...] = ("mem_ecc_corrected", "mem_ecc_uncorrected", "sram_ecc_uncorrected", "sram_ecc_corrected")
_WRAP = 1 << 16
_READ_SIZE = 64  # the files hold one decimal number; KeptFile reads on when one is longer
_LOOK_AGAIN = object()


class NeuronHwCounters(SystemGroup):
    type_name = "neuron_hw_counters"

    def __init__(self, root: RootFS) -> None:
        super().__init__(root)
        self.tree = DriverTree(root)
        # device -> per counter: a kept file, None (not exposed), or _LOOK_AGAIN (look for it at the next read)
        self._files: dict[int, list[Any]] = {}
        self._prev: dict[int, list[int | None]] = {}  # device -> per counter (None: could not be read)

    def _open(self, device: int, k: int) -> KeptFile | None:
        path = self.root.path(f"{self.tree.stats_rel(device)}/hardware/{COUNTERS[k]}")
        return KeptFile(path, _READ_SIZE) if path.exists() else None

    def _drop(self, device: int) -> None:
        for f in self._files.pop(device, ()):
            if isinstance(f, KeptFile):
                f.close()

    def _read_all(self) -> tuple[dict[int, list[int | None]], tuple[int, ...], list[str]]:
        values: dict[int, list[int | None]] = {}
        missing: dict[str, list[int]] = {}
        devices = self.tree.device_indexes()
        for device in devices:
            files = self._files.get(device)
            if files is None:
                files = self._files[device] = [_LOOK_AGAIN] * len(COUNTERS)
            row: list[int | None] = [None] * len(COUNTERS)
            for k, f in enumerate(files):
                if f is _LOOK_AGAIN:
                    f = files[k] = self._open(device, k)
                if f is not None:
                    try:
                        row[k] = int(f.read().strip() or b"0")
                        continue
                    except (OSError, ValueError):
                        f.close()
                        files[k] = _LOOK_AGAIN  # device reset or gone
                missing.setdefault(COUNTERS[k], []).append(device)
            values[device] = row
        if len(self._files) > len(values):  # files kept for devices that are gone
            for device in [d for d in self._files if d not in values]:
                self._drop(device)
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
        none = (None,) * len(COUNTERS)
        for device in devices:
            entry: dict[str, Any] = {"neuron_device_index": device}
            prev_row = self._prev.get(device, none)
            for name, cur, prev in zip(COUNTERS, values[device], prev_row, strict=True):
                if prev is None:
                    prev = cur
                if cur is None or prev is None:
                    entry[name] = 0
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
        for device in list(self._files):
            self._drop(device)


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
