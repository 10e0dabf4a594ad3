"""The Neuron applications now: one snapshot per scheduler wake-up, shared by every runtime group.

`NeuronAppSource.snapshot()` lists each device's attached processes (GET_ALL_APPS_INFO), acquires and maps the
data block of each runtime once (processes without a datastore, such as neuron-ls or this monitor, are skipped),
parses every block, and returns one `App` per pid with an `AppData` in ``App.data``.

Baselines. A block's NC counters are cumulative and, on driver >= 2.30, carried over in a slot from its previous
owner. Each (device, pid) gets a *birth* baseline when first seen: the previous owner's final values when we
watched that slot before (driver >= 2.30), zero when the driver zeroes slabs (older drivers) and the process
started while we were watching, and the current values for processes that were already running when we started
(their history is not reported as new work). Groups count from ``birth`` on.

Departures. When a pid leaves a device's list, its kept mapping is read one last time and that final reading
replaces the reading in the pid's `AppData` (the same object the scheduler hands to the groups as ``gone``), so
the counts between the last collection and the exit are reported once. On drivers that zero the slab at exit,
that final read finds zeros and the last live reading is kept instead (counts after it are lost: a driver
limitation).
"""

from __future__ import annotations

import logging
import mmap
import time
from dataclasses import dataclass, field

from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.app import App
from neuron_monitor.neuron.hardware import Topology, read_topology
from neuron_monitor.neuron.sysfs import DriverTree
from tests.neuron.reference.appsinfo import AppInfo
from tests.neuron.reference.datablock import ZERO_COUNTERS, BlockParser, BlockReading
from tests.neuron.reference.devio import DeviceIO, open_device

log = logging.getLogger("neuron_monitor.neuron.apps")
_CUMULATIVE = frozenset(L.CUMULATIVE_NC_COUNTERS)


def _merge(last: tuple[int, ...], final: tuple[int, ...]) -> tuple[int, ...]:
    """Cumulative counters from the final read, gauges (memory, latency) from the last live read."""
    return tuple(final[i] if i in _CUMULATIVE else v for i, v in enumerate(last))


@dataclass(eq=False)
class DeviceData:
    """One pid's data block on one device: the newest reading and the baseline counts start from."""

    device: int
    reading: BlockReading
    birth: dict[int, tuple[int, ...]]
    birth_time: float
    info: AppInfo
    final: bool = False
    removed: bool = False


@dataclass(eq=False)
class AppData:
    """Everything read for one application; lives as long as the pid (updated in place by each snapshot)."""

    pid: int
    topology: Topology
    devices: dict[int, DeviceData] = field(default_factory=dict)
    final: bool = False
    removed_devices: set[int] = field(default_factory=set)


@dataclass(eq=False)
class _Slot:
    mapping: mmap.mmap
    parser: BlockParser
    owner: int | None = None
    last_nc: dict[int, tuple[int, ...]] | None = None  # the previous owner's final counters


class NeuronAppSource:
    def __init__(self, root: RootFS) -> None:
        self.root = root
        self.tree = DriverTree(root)
        self.topology = Topology((), 0, 1, None, "")
        self._devices: dict[int, DeviceIO] = {}
        self._slots: dict[tuple[int, int], _Slot] = {}  # (device, mmap offset)
        self._pid_slot: dict[tuple[int, int], tuple[int, int]] = {}  # (device, pid) -> slot key
        self._no_datastore: dict[int, set[int]] = {}  # device -> pids without a datastore
        self._apps: dict[int, AppData] = {}
        self._first = True
        self._live_counters = True

    def _refresh_devices(self) -> None:
        indexes = self.tree.device_indexes()
        if tuple(indexes) != self.topology.devices:
            try:
                self.topology = read_topology(self.root)
            except (OSError, ValueError) as e:
                log.warning("reading Neuron topology failed: %s", e)
            version = self.tree.driver_version()
            self._live_counters = version is None or version >= (2, 30)
        for index in indexes:
            if index not in self._devices:
                try:
                    self._devices[index] = open_device(self.root, index)
                except OSError as e:
                    log.debug("device %d unavailable: %s", index, e)
        for index in [i for i in self._devices if i not in indexes]:
            self._devices.pop(index).close()

    def snapshot(self) -> list[App]:
        self._refresh_devices()
        now = time.monotonic()
        seen: dict[int, dict[int, tuple[AppInfo, BlockReading, _Slot]]] = {}  # pid -> device -> ...
        errors: dict[int, str] = {}
        listed: dict[int, set[int]] = {}
        for index, dev in list(self._devices.items()):
            try:
                infos = dev.list_apps()
            except OSError as e:
                log.debug("listing applications on neuron%d failed: %s", index, e)
                self._devices.pop(index).close()
                continue
            pids = listed.setdefault(index, set())
            no_ds = self._no_datastore.setdefault(index, set())
            for info in infos:
                pids.add(info.pid)
                if info.pid in no_ds:
                    continue
                try:
                    slot = self._slot_for(dev, info.pid)
                    if slot is None:
                        no_ds.add(info.pid)
                        continue
                    reading = slot.parser.parse(slot.mapping, now)
                except (OSError, ValueError) as e:
                    errors[info.pid] = f"reading the data block of pid {info.pid} on neuron{index} failed: {e}"
                    continue
                seen.setdefault(info.pid, {})[index] = (info, reading, slot)
            no_ds.intersection_update(pids)
        self._depart(listed, now)
        for app_data in self._apps.values():  # a device the driver no longer lists: final counts once, then gone
            for index in list(app_data.devices):
                if index in self._devices:
                    continue
                app_data.removed_devices.add(index)
                if app_data.devices[index].removed:
                    del app_data.devices[index]
                else:
                    app_data.devices[index].removed = True
        apps = []
        for pid, per_device in seen.items():
            data = self._apps.get(pid)
            if data is None:
                data = self._apps[pid] = AppData(pid, self.topology)
            data.topology = self.topology
            tag = ""
            for index, (info, reading, slot) in sorted(per_device.items()):
                dd = data.devices.get(index)
                if dd is None or dd.final:
                    birth = self._birth(slot, reading, now)
                    data.devices[index] = DeviceData(index, reading, birth, now, info)
                    slot.owner = pid
                else:
                    dd.reading = reading
                    dd.info = info
                tag = tag or reading.tag
            error = errors.pop(pid, "")
            if data.removed_devices:
                gone = ", ".join(f"neuron{i}" for i in sorted(data.removed_devices))
                error = "; ".join(e for e in (error, f"{gone} removed: its NeuronCores are no longer reported") if e)
            apps.append(App(pid=pid, tag=tag or str(pid), error=error, data=data,
                            devices=tuple(sorted(per_device))))  # fmt: skip
        for pid, err in errors.items():
            apps.append(App(pid=pid, tag=str(pid), error=err, data=None, devices=()))
        self._first = False
        return sorted(apps, key=lambda a: a.pid)

    def _slot_for(self, dev: DeviceIO, pid: int) -> _Slot | None:
        key = self._pid_slot.get((dev.index, pid))
        if key is None:
            got = dev.acquire(pid)
            if got is None:
                return None
            offset, size = got
            if size < L.NDS_END:
                raise ValueError(f"datastore of {size} bytes is too small")
            key = (dev.index, offset)
            self._pid_slot[(dev.index, pid)] = key
        slot = self._slots.get(key)
        if slot is None:
            mapping = dev.map_block(key[1], L.NDS_SIZE)
            slot = self._slots[key] = _Slot(mapping, BlockParser(max(1, self.topology.phys_cores or 1)))
        return slot

    def _birth(self, slot: _Slot, reading: BlockReading, now: float) -> dict[int, tuple[int, ...]]:
        if self._first:
            return dict(reading.nc)  # already running when we started: count from now
        if not self._live_counters:
            return dict.fromkeys(reading.nc, ZERO_COUNTERS)  # the driver zeroed the slab for this owner
        if slot.last_nc is not None:
            # carried over from the previous owner; a counter below it means the slab was reset after all
            return {
                core: tuple(0 if c < p else p for c, p in zip(cur, slot.last_nc.get(core, ZERO_COUNTERS), strict=False))
                for core, cur in reading.nc.items()
            }
        return dict(reading.nc)  # a slot we never watched: its history is unknown

    def _depart(self, listed: dict[int, set[int]], now: float) -> None:
        for (index, pid), key in list(self._pid_slot.items()):
            if index in listed and pid in listed[index]:
                continue
            del self._pid_slot[(index, pid)]
            slot = self._slots.get(key)
            data = self._apps.get(pid)
            dd = data.devices.get(index) if data else None
            if slot is None or dd is None or dd.final:
                continue
            try:
                final = slot.parser.parse(slot.mapping, now)
            except (OSError, ValueError):
                final = None
            if final is not None and self._kept_counts(dd.reading, final):
                # the slab is no longer this pid's: keep its counters, not its (cleared) memory and models
                nc = {core: _merge(last, final.nc.get(core, last)) for core, last in dd.reading.nc.items()}
                dd.reading = BlockReading(now, dd.reading.initialized, dd.reading.nd, nc, dd.reading.tag,
                                          dd.reading.models)  # fmt: skip
            dd.final = True
            slot.last_nc = dict(dd.reading.nc)
            slot.owner = None
        for pid in [p for p, d in self._apps.items() if all(dd.final for dd in d.devices.values())]:
            self._apps.pop(pid).final = True

    @staticmethod
    def _kept_counts(last: BlockReading, final: BlockReading) -> bool:
        """True when the final read still holds this pid's counters (not zeroed by an older driver)."""
        for core, counters in last.nc.items():
            now = final.nc.get(core, ZERO_COUNTERS)
            if any(now[i] < counters[i] for i in L.CUMULATIVE_NC_COUNTERS):
                return False
        return True

    def close(self) -> None:
        for dev in self._devices.values():
            dev.close()
        self._devices.clear()
        for slot in self._slots.values():
            slot.mapping.close()
        self._slots.clear()
