"""The Neuron applications now: one snapshot per scheduler wake-up, shared by every runtime group.

`NeuronAppSource.snapshot()` lists each device's attached processes (GET_ALL_APPS_INFO), acquires and maps the
data block of each runtime once (processes without a datastore, such as neuron-ls or this monitor, are skipped),
parses every block, and returns one `App` per pid with an `AppData` in ``App.data``.

Baselines. A block's NC counters are cumulative and, on driver >= 2.30, carried over in a slot from its previous
owner. Each (device, pid) gets a *birth* baseline when first seen: the previous owner's final values when we
watched that slot before (driver >= 2.30), zero when the driver zeroes slabs (older drivers) and the process
started while we were watching, and the current values for processes that were already running when we started
(their history is not reported as new work). Groups count from ``birth`` on.

Departures. When a pid leaves a device's list, its kept block is read one last time and that final reading
replaces the reading in the pid's `AppData` (the same object the scheduler hands to the groups as ``gone``), so
the counts between the last collection and the exit are reported once. On drivers that zero the slab at exit,
that final read finds zeros and the last live reading is kept instead (counts after it are lost: a driver
limitation).

Steady state. When every device lists the same processes as in the last full snapshot (the device layer hands out
the same list object while the driver's answer is unchanged), nothing can have been born or have departed: the
same blocks are read again into the same `DeviceData` and the same `App` objects are returned (a new `App` only
when a tag changed). ``version`` stays the same through such snapshots and changes with every other one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.app import App
from neuron_monitor.neuron.appsinfo import AppInfo
from neuron_monitor.neuron.datablock import BlockParser, BlockReading, N, zero_counters
from neuron_monitor.neuron.devio import Block, DeviceIO, open_device
from neuron_monitor.neuron.hardware import Topology, read_topology
from neuron_monitor.neuron.sysfs import DriverTree

log = logging.getLogger("neuron_monitor.neuron.apps")
_CUMULATIVE = tuple(i in L.CUMULATIVE_NC_COUNTERS for i in range(N))  # per counter of a core: cumulative?


def _fit(counters: Sequence[int], like: Sequence[int], filler: Sequence[int]) -> Sequence[int]:
    """``counters`` cut or extended (from ``filler``) to the cores of ``like``."""
    n = len(like)
    if len(counters) == n:
        return counters
    return tuple(counters[:n]) + tuple(filler[len(counters) : n])


def _merge(last: Sequence[int], final: Sequence[int]) -> tuple[int, ...]:
    """Cumulative counters from the final read, gauges (memory, latency) from the last live read."""
    final = _fit(final, last, last)
    mask = _CUMULATIVE * (len(last) // N)
    return tuple(f if cumulative else v for v, f, cumulative in zip(last, final, mask, strict=True))


@dataclass(eq=False)
class DeviceData:
    """One pid's data block on one device: the newest reading and the baseline counts start from."""

    device: int
    reading: BlockReading
    birth: Sequence[int]  # counters (as BlockReading.counters) that counting starts from
    birth_time: float
    info: AppInfo
    final: bool = False
    removed: bool = False  # the device left the driver's listing: final counts reported once, then dropped


@dataclass(eq=False)
class AppData:
    """Everything read for one application; lives as long as the pid (updated in place by each snapshot)."""

    pid: int
    topology: Topology
    devices: dict[int, DeviceData] = field(default_factory=dict)
    final: bool = False
    removed_devices: set[int] = field(default_factory=set)  # devices it used that the driver no longer lists


@dataclass(eq=False)
class _Slot:
    block: Block
    parser: BlockParser
    owner: int | None = None
    last_counters: Sequence[int] | None = None  # the previous owner's final counters


def _pid_of(app: App) -> int:
    return app.pid


@dataclass(eq=False)
class _Steady:
    """What the last full snapshot found, to repeat it cheaply while every device lists the same processes."""

    lists: tuple[tuple[int, list[AppInfo]], ...]  # (device, the list object list_apps returned)
    blocks: list[tuple[DeviceData, _Slot]]  # every block read
    tags: list[tuple[App, tuple[DeviceData, ...]]]  # each application and its blocks in device order
    apps: list[App]  # the applications returned, by pid


def _same_lists(last: tuple[tuple[int, list[AppInfo]], ...], now: list[tuple[int, DeviceIO, list[AppInfo]]]) -> bool:
    if len(last) != len(now):
        return False
    return all(a[0] == b[0] and a[1] is b[2] for a, b in zip(last, now, strict=True))


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
        self._steady: _Steady | None = None
        self._indexes: tuple[int, ...] = ()  # the device listing the open devices were last checked against
        self._lost: dict[int, str] = {}  # device -> why it was dropped, for the error of its applications
        self._unasked: dict[int, str] = {}  # listed device -> why its applications cannot be listed now
        self.version = 0  # bumped whenever a snapshot may differ from the previous one (see AppSource)

    def _refresh_devices(self) -> None:
        indexes = self.tree.device_indexes()
        if indexes is self._indexes and len(indexes) == len(self._devices) and indexes == self.topology.devices:
            return  # the same listing (DriverTree returns the same tuple), its topology read, every device open
        self._indexes = indexes
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
                    self._cannot_ask(index, f"opening it failed: {e.strerror or e}")
                    self.tree.forget_listing()  # gone since it was listed? The next collection lists again
        for index in [i for i in self._devices if i not in indexes]:
            self._devices.pop(index).close()
        for index in [i for i in self._unasked if i not in indexes]:
            del self._unasked[index]

    def _cannot_ask(self, index: int, why: str) -> None:
        """Device ``index`` is listed but its applications cannot be listed: named in `problem`, logged once per
        reason (a warning: a host whose devices cannot be opened would otherwise look like one running nothing)."""
        if self._unasked.get(index) != why:
            log.warning("the applications on neuron%d cannot be listed: %s", index, why)
        self._unasked[index] = why

    @property
    def problem(self) -> str:
        """Why some listed device's applications cannot be listed now ("" when every device answered): the
        report's ``neuron_monitor.error``, so an empty ``neuron_runtime_data`` is never taken for an idle host."""
        if not self._unasked:
            return ""
        return "Neuron applications not listed: " + "; ".join(
            f"neuron{index}: {why}" for index, why in sorted(self._unasked.items())
        )

    def snapshot(self) -> list[App]:
        self._refresh_devices()
        now = time.monotonic()
        lists: list[tuple[int, DeviceIO, list[AppInfo]]] = []
        for index, dev in list(self._devices.items()):
            try:
                lists.append((index, dev, dev.list_apps()))
            except OSError as e:
                why = f"listing its applications failed: {e.strerror or e}"
                self._cannot_ask(index, why)
                self._drop_device(index, why)
            else:
                self._unasked.pop(index, None)
        steady = self._steady
        if steady is not None and _same_lists(steady.lists, lists):
            apps = self._steady_snapshot(steady, now)
            if apps is not None:
                return apps
        return self._full_snapshot(lists, now)

    def _steady_snapshot(self, steady: _Steady, now: float) -> list[App] | None:
        """Every device listed the same processes as last time: read the same blocks again and update the
        same applications in place (no births, departures or new slots are possible). None on any error."""
        tags_changed = False
        try:
            for dd, slot in steady.blocks:
                reading = slot.parser.parse(slot.block.read(), now)
                if reading.tag is not dd.reading.tag:  # the parser hands out the same str while unchanged
                    tags_changed = True
                dd.reading = reading
        except (OSError, ValueError):
            return None  # the full path reports it
        apps = steady.apps
        if not tags_changed:
            return list(apps)
        self.version += 1
        for i, (app, dds) in enumerate(steady.tags):
            tag = ""
            for dd in dds:
                tag = tag or dd.reading.tag
            tag = tag or str(app.pid)
            if tag != app.tag:
                app = App(app.pid, tag, "", app.data, app.devices)
                steady.tags[i] = (app, dds)
                apps[i] = app
        return list(apps)

    def _full_snapshot(self, lists: list[tuple[int, DeviceIO, list[AppInfo]]], now: float) -> list[App]:
        self.version += 1
        seen: dict[int, dict[int, tuple[AppInfo, BlockReading, _Slot]]] = {}  # pid -> device -> ...
        errors: dict[int, str] = {}
        listed: dict[int, set[int]] = {}
        for index, dev, infos in lists:
            pids = listed.setdefault(index, set())
            no_ds = self._no_datastore.setdefault(index, set())
            for info in infos:
                pid = info.pid
                pids.add(pid)
                if pid in no_ds:
                    continue
                try:
                    slot = self._slot_for(dev, pid)
                    if slot is None:
                        no_ds.add(pid)
                        continue
                    reading = slot.parser.parse(slot.block.read(), now)
                except (OSError, ValueError) as e:
                    errors[pid] = f"reading the data block of pid {pid} on neuron{index} failed: {e}"
                    continue
                per_device = seen.get(pid)
                if per_device is None:
                    seen[pid] = {index: (info, reading, slot)}
                else:
                    per_device[index] = (info, reading, slot)
            if no_ds:
                no_ds.intersection_update(pids)
        self._depart(listed, now)
        read_failed = bool(errors)
        dropping = self._drop_removed_devices()
        apps = []
        steady = _Steady(tuple((index, infos) for index, _, infos in lists), [], [], [])
        for pid, per_device in sorted(seen.items()):
            data = self._apps.get(pid)
            if data is None:
                data = self._apps[pid] = AppData(pid, self.topology)
            data.topology = self.topology
            tag = ""
            devices = tuple(sorted(per_device))
            dds = []
            for index in devices:
                info, reading, slot = per_device[index]
                dd = data.devices.get(index)
                if dd is None or dd.final:
                    birth = self._birth(slot, reading)
                    dd = data.devices[index] = DeviceData(index, reading, birth, now, info)
                    slot.owner = pid
                else:
                    dd.reading = reading
                    dd.info = info
                steady.blocks.append((dd, slot))
                dds.append(dd)
                tag = tag or reading.tag
            error = errors.pop(pid, "")
            if data.removed_devices:
                gone = ", ".join(
                    f"neuron{i}" + (f" ({self._lost[i]})" if i in self._lost else "")
                    for i in sorted(data.removed_devices)
                )
                error = "; ".join(filter(None, (error, f"{gone} removed: its NeuronCores are no longer reported")))
            app = App(pid, tag or str(pid), error, data, devices)
            apps.append(app)
            steady.tags.append((app, tuple(dds)))
        for pid, err in errors.items():
            apps.append(App(pid=pid, tag=str(pid), error=err, data=None, devices=()))
        self._first = False
        apps.sort(key=_pid_of)
        self._steady = steady if not (read_failed or dropping) else None
        steady.apps = list(apps)
        return apps

    def _drop_device(self, index: int, why: str) -> None:
        """Close a device that failed, with every block mapped from it (none of them is read again: a shrunk
        simulated file would kill the process with SIGBUS); its applications report it as removed, with ``why``."""
        self._devices.pop(index).close()
        for key in [k for k in self._slots if k[0] == index]:
            self._slots.pop(key).block.close()
        self._lost[index] = why
        self._steady = None
        self.tree.forget_listing()

    def _drop_removed_devices(self) -> bool:
        """Devices that left the driver's listing: each application's block there (final since `_depart`) is
        marked removed and reported once more with its final counts, then dropped at the next snapshot, so its
        cores leave the report; the application carries an error naming the device from then on. True while a
        drop is pending (the next snapshot must be a full one)."""
        pending = False
        for data in self._apps.values():
            for index in [i for i in data.devices if i not in self._devices]:
                dd = data.devices[index]
                data.removed_devices.add(index)
                if dd.removed:
                    del data.devices[index]
                else:
                    dd.removed = True
                    pending = True
        return pending

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
            block = dev.map_block(key[1], L.NDS_END)  # what the parser reads of the slab
            slot = self._slots[key] = _Slot(block, BlockParser(max(1, self.topology.phys_cores or 1)))
        return slot

    def _birth(self, slot: _Slot, reading: BlockReading) -> Sequence[int]:
        current = reading.counters
        if self._first:
            return current  # already running when we started: count from now
        if not self._live_counters:
            return zero_counters(reading.cores)  # the driver zeroed the slab for this owner
        if slot.last_counters is not None:
            # carried over from the previous owner; a counter below it means the slab was reset after all
            last = _fit(slot.last_counters, current, zero_counters(reading.cores))
            return tuple(0 if c < p else p for c, p in zip(current, last, strict=True))
        return current  # a slot we never watched: its history is unknown

    def _depart(self, listed: dict[int, set[int]], now: float) -> None:
        departed = False
        for (index, pid), key in list(self._pid_slot.items()):
            if index in listed and pid in listed[index]:
                continue
            departed = True
            del self._pid_slot[(index, pid)]
            slot = self._slots.get(key)
            data = self._apps.get(pid)
            dd = data.devices.get(index) if data else None
            if slot is None or dd is None or dd.final:
                continue
            try:
                final = slot.parser.parse(slot.block.read(), now)
            except (OSError, ValueError):
                final = None
            last = dd.reading
            if final is not None and self._kept_counts(last, final):
                # the slab is no longer this pid's: keep its counters, not its (cleared) memory and models
                counters = _merge(last.counters, final.counters)
                dd.reading = BlockReading(now, last.initialized, last.nd_values, counters, last.tag, last.models)
            dd.final = True
            slot.last_counters = dd.reading.counters
            slot.owner = None
        if departed:
            for pid in [p for p, d in self._apps.items() if all(dd.final for dd in d.devices.values())]:
                self._apps.pop(pid).final = True

    @staticmethod
    def _kept_counts(last: BlockReading, final: BlockReading) -> bool:
        """True when the final read still holds this pid's counters (not zeroed by an older driver)."""
        was = last.counters
        now = _fit(final.counters, was, zero_counters(last.cores))
        mask = _CUMULATIVE * last.cores
        return not any(n < w for w, n, cumulative in zip(was, now, mask, strict=True) if cumulative)

    def close(self) -> None:
        self._steady = None
        for dev in self._devices.values():
            dev.close()
        self._devices.clear()
        for slot in self._slots.values():
            slot.block.close()
        self._slots.clear()
