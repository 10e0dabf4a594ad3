"""System group ``neuron_hw_counters``: ECC events per Neuron device over the period.

Reads ``stats/hardware/{mem,sram}_ecc_{corrected,uncorrected}`` of each device in the driver's sysfs tree (kept
descriptors, re-read at offset 0). The driver prints cumulative firmware counts (16-bit fields), so this group
reports per-period counts by the project's counter rule (util/counters.py; the sources' driver facts in
neuron/plausible.py): the change since its previous collection, a drop being a reset (a drop to 0, which the driver
also prints when its firmware read fails, counts nothing) unless a wrap of the 16-bit field is proven, the first
period counting from the baseline taken at start, a value past what the field holds named in ``error``. That is what
AWS's exporter assumes when it adds the values up. A counter the group could not read (its file not exposed: Inf1,
drivers before 2.30 for the corrected counts; or not found, or unreadable) is left out of the device's entry, never
reported as 0, and named in ``error``; nothing here raises for a missing device or file. The files are found where
the device's known layout puts them, else by the bounded search of neuron/discovery.py (`DriverTree.find`);
`sources` says what was found.

Cost: a trn2.48xlarge has 64 of these files. While the device listing and the set of open files stay as they were,
all of them are read in one pass of preads on the kept descriptors and converted in one ``map(int)``; any error, odd
content or change of listing takes the careful per-file path, which reopens, notes what is missing, and sets up the
next fast pass. When that pass reads the very bytes of the previous one (no ECC event anywhere: the usual case),
nothing is converted or compared per device: the body is the shared all-zero body of that pass. The body's keys
and types: body.py.
"""

from __future__ import annotations

import os
import time
from typing import Any, NamedTuple, cast

from neuron_monitor.groups.base import SystemGroup
from neuron_monitor.groups.neuron_hw_counters import body as B
from neuron_monitor.groups.neuron_hw_counters.body import DeviceEcc, NeuronHwCountersBody
from neuron_monitor.host.rootfs import KeptFile, RootFS
from neuron_monitor.neuron.nodes import ECC_BY_COUNTER
from neuron_monitor.neuron.plausible import ECC_SOURCES as SOURCES
from neuron_monitor.neuron.sysfs import DriverTree
from neuron_monitor.neuron.telemetry_files import parse_counter, parse_counters
from neuron_monitor.util.counters import step
from neuron_monitor.util.errors import GroupError
from neuron_monitor.util.ranges import device_ranges

COUNTERS: tuple[str, ...] = B.COUNTERS  # a device entry's counters, in report order
_READ_SIZE = 64  # the files hold one decimal number; KeptFile reads on when one is longer
_LOOK_AGAIN = object()


class _FastPass(NamedTuple):
    """What the careful path found, for the next collections' one-pass read."""

    devices: tuple[int, ...]  # the device listing it was set up for
    fds: list[int]  # the kept descriptors of every counter file present, device-major, counter order
    present: list[tuple[bool, ...]] | None  # per device: which counters have a file (None: all of them)
    errors: list[str]  # what is not exposed (it stays so while the listing does not change)


class NeuronHwCounters(SystemGroup):
    type_name = "neuron_hw_counters"

    def __init__(self, root: RootFS) -> None:
        super().__init__(root)
        self.tree = DriverTree(root)
        # device -> per counter: a kept file, None (not exposed), or _LOOK_AGAIN (look for it at the next read)
        self._files: dict[int, list[Any]] = {}
        self._prev: dict[int, list[int | None]] = {}  # device -> per counter (None: could not be read)
        self._fast: _FastPass | None = None
        self._zero_entries: dict[tuple[int, Any], DeviceEcc] = {}  # (device, presence) -> entry, all zero
        self._raws: list[bytes] | None = None  # what the last read found, when it was a one-pass read
        self._quiet: tuple[_FastPass, NeuronHwCountersBody] | None = None  # a fast pass and its all-zero body
        self._settled = False  # every counter read has a baseline (else the same bytes again are not "nothing")
        self._last_time: float | None = None  # monotonic time of the previous read

    def _open(self, device: int, k: int) -> KeptFile | None:
        rel = self.tree.find(device, ECC_BY_COUNTER[COUNTERS[k]]).rel
        return self.root.open_kept(rel, _READ_SIZE) if rel is not None else None

    def _drop(self, device: int) -> None:
        for f in self._files.pop(device, ()):
            if isinstance(f, KeptFile):
                f.close()

    def _read_all(self) -> tuple[dict[int, list[int | None]] | None, tuple[int, ...], list[str]]:
        """Every counter of every listed device (device -> per counter, None where not read), the listing, and
        what is not exposed. The values are None when a one-pass read found the bytes the previous one-pass read
        found: nothing changed since the last read."""
        devices = self.tree.device_indexes()
        fast = self._fast
        if fast is not None and devices == fast.devices:
            raws = self._pread_fast(fast)
            if raws is not None:
                if raws == self._raws and self._settled:
                    return None, devices, fast.errors
                values = self._read_fast(fast, raws)
                if values is not None:
                    self._raws = raws
                    return values, devices, fast.errors
        self._fast = self._raws = None
        values, errors = self._read_careful(devices)
        self._fast = self._plan(devices, errors)
        return values, devices, errors

    @staticmethod
    def _pread_fast(fast: _FastPass) -> list[bytes] | None:
        """The bytes of every present counter file, one pread each; None on any error."""
        pread = os.pread
        try:
            return [pread(fd, _READ_SIZE, 0) for fd in fast.fds]
        except OSError:
            return None

    @staticmethod
    def _read_fast(fast: _FastPass, raws: list[bytes]) -> dict[int, list[int | None]] | None:
        """Every present counter from the one-pass read's bytes; None when anything is unusual (the careful path
        then decides)."""
        # the same bytes as the careful path's parse_counter, or None (a file as long as a read, too: read it in
        # full, carefully)
        parsed = parse_counters(raws, _READ_SIZE)
        if parsed is None:
            return None
        nums = cast("list[int | None]", parsed)
        k = len(COUNTERS)
        if fast.present is None:
            return {d: nums[i * k : i * k + k] for i, d in enumerate(fast.devices)}
        values: dict[int, list[int | None]] = {}
        at = iter(nums)
        for d, present in zip(fast.devices, fast.present, strict=True):
            values[d] = [next(at) if p else None for p in present]
        return values

    def _plan(self, devices: tuple[int, ...], errors: list[str]) -> _FastPass | None:
        """The fast pass for the files the careful path left open; None while some file is to be looked for."""
        fds: list[int] = []
        present: list[tuple[bool, ...]] = []
        for device in devices:
            files = self._files.get(device)
            if files is None or any(f is _LOOK_AGAIN for f in files):
                return None
            fds += [f.fileno() for f in files if isinstance(f, KeptFile)]
            present.append(tuple(isinstance(f, KeptFile) for f in files))
        everywhere = all(all(p) for p in present)
        return _FastPass(devices, fds, None if everywhere else present, errors)

    def _read_careful(self, devices: tuple[int, ...]) -> tuple[dict[int, list[int | None]], list[str]]:
        values: dict[int, list[int | None]] = {}
        missing: dict[str, list[int]] = {}
        bad: list[str] = []
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
                        row[k] = parse_counter(f.read())
                        continue
                    except ValueError as e:  # a file that is there but does not hold a counter: named, 0 counted
                        bad.append(f"{COUNTERS[k]} of neuron_device {device}: {e}")
                        f.close()
                        files[k] = _LOOK_AGAIN
                        continue
                    except OSError as e:
                        f.close()
                        files[k] = _LOOK_AGAIN  # device reset or gone, or the driver moved the file
                        self.tree.forget(device)
                        if self.tree.find(device, ECC_BY_COUNTER[COUNTERS[k]]).rel is not None:
                            # still there (no permission, not a regular file): unreadable, not unexposed
                            bad.append(f"{COUNTERS[k]} of neuron_device {device}: {e.strerror or e}")
                            continue
                if not self.tree.find(device, ECC_BY_COUNTER[COUNTERS[k]]).problem:  # else named below
                    missing.setdefault(COUNTERS[k], []).append(device)
            values[device] = row
        if len(self._files) > len(values):  # files kept for devices that are gone
            for device in [d for d in self._files if d not in values]:
                self._drop(device)
        errors = [
            f"{name} not exposed by the driver for neuron_device {device_ranges(devs)}"
            for name, devs in missing.items()
        ]
        return values, errors + self.tree.problems(devices) + bad

    def prime(self) -> None:
        values, _, _ = self._read_all()
        self._last_time = time.monotonic()
        if values is not None:
            self._prev = values
            self._settled = True  # the first read is every counter's baseline

    def _dt(self) -> float:
        """Seconds since the previous read (0 at the first)."""
        now = time.monotonic()
        last, self._last_time = self._last_time, now
        return 0.0 if last is None else max(0.0, now - last)

    def _zero_entry(self, device: int, present: tuple[bool, ...] | None = None) -> DeviceEcc:
        """The device's entry when nothing happened, with the counters ``present`` (default: all) at 0 (one shared
        object per device and presence, never mutated)."""
        key = (device, present)
        entry = self._zero_entries.get(key)
        if entry is None:
            names = COUNTERS if present is None else [n for n, p in zip(COUNTERS, present, strict=True) if p]
            zero: dict[str, Any] = {B.NEURON_DEVICE_INDEX: device, **dict.fromkeys(names, 0)}
            entry = self._zero_entries[key] = cast("DeviceEcc", zero)  # COUNTERS are DeviceEcc's counter keys
        return entry

    def _quiet_body(self, fast: _FastPass) -> NeuronHwCountersBody:
        """The body of a collection in which nothing changed under ``fast``: every count 0 (one object per fast
        pass, returned again while nothing changes; never mutated)."""
        if self._quiet is not None and self._quiet[0] is fast:
            return self._quiet[1]
        present: list[tuple[bool, ...] | None] = [None] * len(fast.devices) if fast.present is None else [*fast.present]
        body: NeuronHwCountersBody = {
            B.NEURON_DEVICES: [self._zero_entry(d, p) for d, p in zip(fast.devices, present, strict=True)]
        }
        if fast.errors:
            body[B.ERROR] = "; ".join(fast.errors)
        self._quiet = (fast, body)
        return body

    def collect(self) -> dict[str, Any]:
        values, devices, errors = self._read_all()
        if not devices:
            raise GroupError("no Neuron devices found (is the Neuron driver loaded?)")
        if values is None:  # the same bytes as the last read (so the same values as self._prev): all zero
            assert self._fast is not None
            self._last_time = time.monotonic()
            return cast("dict[str, Any]", self._quiet_body(self._fast))  # the very same object while quiet
        out: list[DeviceEcc] = []
        none = (None,) * len(COUNTERS)
        next_prev: dict[int, list[int | None]] = {}
        dt = self._dt()
        settled = True
        for device in devices:
            prev_row = self._prev.get(device, none)
            row = values[device]
            if row == prev_row and None not in row:  # nothing happened (the usual case): the shared zero entry
                out.append(self._zero_entry(device))
                next_prev[device] = row
                continue
            entry: dict[str, Any] = {B.NEURON_DEVICE_INDEX: device}  # a DeviceEcc: COUNTERS are its keys
            kept: list[int | None] = []
            for name, cur, prev in zip(COUNTERS, row, prev_row, strict=True):
                count, baseline, problem = step(prev, cur, dt, SOURCES[name])
                kept.append(baseline)
                settled = settled and (baseline is not None or cur is None)
                if cur is None:  # not read: left out (named in error), never 0
                    continue
                if problem is not None:  # refused (util/counters.py): left out, named in error
                    errors = [*errors, f"{name} of neuron_device {device}: {problem}"]
                    continue
                entry[name] = count or 0  # a new baseline, or a drop to the driver's failure value: nothing new
            next_prev[device] = kept
            out.append(cast("DeviceEcc", entry))
        self._prev = next_prev
        self._settled = settled
        body: NeuronHwCountersBody = {B.NEURON_DEVICES: out}
        if errors:
            body[B.ERROR] = "; ".join(errors)
        return cast("dict[str, Any]", body)  # SystemGroup.collect's plain dict (no copy)

    def sources(self) -> dict[str, Any]:
        return self.tree.sources()

    def close(self) -> None:
        self._fast = self._raws = self._quiet = None
        for device in list(self._files):
            self._drop(device)


GROUP = NeuronHwCounters
