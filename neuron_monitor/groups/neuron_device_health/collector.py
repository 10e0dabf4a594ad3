"""System group ``neuron_device_health``: a healthy/unhealthy/unknown verdict per Neuron device and for the node,
with its reasons, and the devices' fault events counted once (the rules: rules.py here, docs/health.md).

Reads, per device listed by the driver (every file through the RootFS, inside ``--root``): ``stats/hardware/``
``{mem,sram}_ecc_uncorrected``, ``mem_ecc_repairable_uncorrected``, ``health_status/unhealthy_components``,
``health_status/hw_error_event`` and ``stats/power/utilization``; the device listing itself; once, the instance
type (``sys/class/dmi/id/product_name``, which EC2 sets to it) for the devices the instance must have.

Fast watch: besides its collections, the scheduler calls `watch` every ``watch_interval`` seconds (0.5 s),
whatever the group's period. A watch reads the same few files (one pread each on kept descriptors) and the
listing, and returns True when a verdict, a finding or a fault count changed; the scheduler then collects this
group at once and writes a report (the other groups carried over), so a fault reaches the report within one
watch interval. When nothing changed (the usual case) a watch compares bytes and returns.

Fault events (fault_events.py here) are counted by the watches and handed to the next collection's body, so a
report carries each event once. With a state directory (``neuron-monitor --state-dir``, or systemd's
``$STATE_DIRECTORY``) the ledger is saved there whenever it changes, so a restart counts only what happened
while the daemon was down. The body's keys and types: body.py.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, cast

from neuron_monitor.groups.base import SystemGroup
from neuron_monitor.groups.neuron_device_health import body as B
from neuron_monitor.groups.neuron_device_health import rules as H
from neuron_monitor.groups.neuron_device_health.body import (
    DeviceHealth,
    FaultEvent,
    FaultTotal,
    Health,
    NeuronDeviceHealthBody,
)
from neuron_monitor.groups.neuron_device_health.fault_events import FaultLedger
from neuron_monitor.host.rootfs import KeptFile, RootFS
from neuron_monitor.neuron import nodes as NODES
from neuron_monitor.neuron.sysfs import CLASS_DIR, DEVICES_DIR, DriverTree
from neuron_monitor.neuron.telemetry_files import parse_count, parse_power, parse_unhealthy_components
from neuron_monitor.util import fdlimit
from neuron_monitor.util.fdlimit import OutOfDescriptors
from neuron_monitor.util.inputfile import InputFileError, read_regular

log = logging.getLogger("neuron_monitor.health")

WATCH_INTERVAL = 0.5  # seconds between two watches: a fault is in a report within this (plus one collection)
STATE_FILE = "fault-events.json"
STATE_MAX_BYTES = 1 << 20
SAVE_RETRY = 5.0  # seconds between two attempts to save the state after a failed one (collections always try)
_READ = 256
# the files of a device, in the order of _DeviceFiles.files
_FILES = (
    ("mem_ecc_uncorrected", NODES.MEM_ECC_UNCORRECTED),
    ("sram_ecc_uncorrected", NODES.SRAM_ECC_UNCORRECTED),
    ("mem_ecc_repairable_uncorrected", NODES.MEM_ECC_REPAIRABLE),
    ("unhealthy_components", NODES.UNHEALTHY_COMPONENTS),
    ("hw_error_event", NODES.HW_ERROR_EVENT),
    ("power/utilization", NODES.POWER_UTILIZATION),
)


@dataclass
class _DeviceFiles:
    index: int
    files: list[KeptFile | None]  # None: not exposed by this driver, or not found
    missing: tuple[tuple[str, str], ...] = ()  # expected signals not found (rules.expected_signals): family, why


def _wall() -> float:
    return round(time.time(), 3)


class NeuronDeviceHealth(SystemGroup):
    type_name = "neuron_device_health"

    def __init__(
        self,
        root: RootFS,
        clock: Any = _wall,
        *,
        state_dir: str | None = None,
        watch_interval: float = WATCH_INTERVAL,
    ) -> None:
        """``state_dir`` (the daemon's --state-dir; None: counts live in memory only) and ``watch_interval`` (its
        --health-watch-interval) come from the configuration plan's options for this group."""
        super().__init__(root)
        self.state_dir = state_dir
        self.watch_interval = watch_interval
        self.tree = DriverTree(root)
        self.clock = clock
        self._listed: tuple[int, ...] | None = None
        self._replan = False  # a read failed: plan the files again at the next poll
        self._devices: list[_DeviceFiles] = []
        self._fds: list[int] | None = None  # the kept descriptors in plan order (-1: not exposed), once all opened
        self._class_fd: int | None = None  # the device listing's directory
        self._last_raw: tuple[tuple[int, ...], list[bytes | None]] | None = None
        self.verdicts: dict[int, H.Verdict] = {}
        self.node: H.Verdict | None = None
        self.instance_type = self._instance_type()
        expected = H.expected_devices(self.instance_type)
        self.expected: set[int] = set(range(expected)) if expected else set()
        self._failed = ""  # why the last poll could not read (no descriptor left), or ""
        self._state_error = ""
        self._load_error = ""
        self._retry_at = 0.0  # monotonic time before which a failed save is not tried again by a poll
        self._boot_id = self._read_boot_id()
        self.ledger = self._load_ledger()
        self.expected |= {d for (d, _) in self.ledger.totals}  # devices a previous run saw
        self._changed = False

    # -- setup --------------------------------------------------------------------------------------------
    def _instance_type(self) -> str:
        try:
            value = self.root.read_text("sys/class/dmi/id/product_name").strip()
        except OSError:
            return ""
        return value if "." in value and len(value) < 64 else ""

    def _read_boot_id(self) -> str:
        try:
            return self.root.read_text("proc/sys/kernel/random/boot_id").strip()[:64]
        except OSError:
            return ""

    def _state_path(self) -> str | None:
        return os.path.join(self.state_dir, STATE_FILE) if self.state_dir else None

    def _load_ledger(self) -> FaultLedger:
        """The ledger saved by an earlier run; a fresh one (a baseline: counting from now) when the state cannot be
        read or is refused, with the reason logged and in the group's ``error`` (a ledger that lies is worse)."""
        path = self._state_path()
        if path is None:
            return FaultLedger(count_existing=False)
        try:
            raw = read_regular(path, STATE_MAX_BYTES)
        except InputFileError as e:
            if os.path.lexists(path):
                return self._refused(f"fault-event state not read ({e}); counting from now")
            return FaultLedger(count_existing=True)  # the first run with a state: what the driver counted is new
        try:
            return FaultLedger.from_state(json.loads(raw), self._boot_id)
        except RecursionError:  # nested past the parser's depth: not a state this program wrote
            return self._refused(f"fault-event state {path} not used (nested too deeply); counting from now")
        except ValueError as e:
            return self._refused(f"fault-event state {path} not used ({str(e)[:120]}); counting from now")

    def _refused(self, why: str) -> FaultLedger:
        log.warning("%s", why)
        self._load_error = why  # in the first collection's error (a successful save clears _state_error)
        return FaultLedger(count_existing=False)

    def _save_ledger(self, force: bool = False) -> bool:
        """Write the ledger to the state directory when it changed: a temporary file written and fsynced, renamed
        over the state, the directory fsynced. True when the state on disk is the ledger's now (or there is no
        state directory). A failure keeps `changed` set, so the next poll (at most every `SAVE_RETRY` seconds) or
        collection tries again."""
        path = self._state_path()
        if path is None:
            return True
        if not self.ledger.changed:
            return True
        now = time.monotonic()
        if not force and now < self._retry_at:
            return False
        data = json.dumps(self.ledger.to_state(self._boot_id), separators=(",", ":")).encode()
        directory = os.path.dirname(path)
        tmp = f"{path}.tmp{os.getpid()}"
        try:
            os.makedirs(directory, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            try:
                view = memoryview(data)
                while view:  # a short write (a nearly full disk) writes the rest or fails with ENOSPC
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            with contextlib.suppress(OSError):  # the rename durable too (a filesystem may refuse a directory fsync)
                dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            why = f"fault-event state not saved to {path}: {e.strerror or e}"
            if why != self._state_error:
                log.warning("%s; new fault events are held until it can be saved", why)
            self._state_error = why
            self._retry_at = now + SAVE_RETRY
            return False
        self.ledger.changed = False
        self._state_error = ""
        self._retry_at = 0.0
        return True

    # -- reading --------------------------------------------------------------------------------------------
    def _list_devices(self) -> tuple[int, ...]:
        """The devices the driver lists now: the class directory read through a kept descriptor (no path walk
        per watch), opened again when it fails or lists nothing."""
        fd = self._class_fd
        if fd is not None:
            try:
                found = _devices_in(os.listdir(fd))
                if found:
                    return found
            except OSError as e:
                fdlimit.check(e, "the device listing")  # listing a kept directory takes a descriptor too
            os.close(fd)
            self._class_fd = None
        for rel in (CLASS_DIR, DEVICES_DIR):
            try:
                fd = self.root.open_fd(rel, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                found = _devices_in(os.listdir(fd))
            except OSError as e:
                os.close(fd)
                fdlimit.check(e, "the device listing")
                found = ()
                continue
            if found:
                self._class_fd = fd
                return found
            os.close(fd)
        return ()

    def _close_devices(self) -> None:
        for dev in self._devices:
            for f in dev.files:
                if f is not None:
                    f.close()
        self._devices = []

    def _plan(self, listed: tuple[int, ...]) -> None:
        self._close_devices()
        version = self.tree.driver_version()
        for index in listed:
            self.tree.forget(index)  # a device listed anew (or back): its nodes are looked for again
            files: list[KeptFile | None] = []
            found = {}
            for _, node in _FILES:
                found[node.family] = where = self.tree.find(index, node)
                files.append(self.root.open_kept(where.rel, _READ) if where.rel is not None else None)
            missing = tuple(
                (family, found[family].problem)
                for family in H.expected_signals(self.tree.device_name(index), version)
                if found[family].rel is None
            )
            self._devices.append(_DeviceFiles(index, files, missing))
        self._listed = listed
        self._last_raw = None
        self._fds = None

    def _read_raw(self) -> list[bytes | None]:
        """One pread per exposed file of every listed device, in plan order (None: not exposed): one pass over the
        kept descriptors, each file again through its `KeptFile` (reopened if stale) when the pass failed."""
        fds = self._fds
        if fds is not None:
            pread = os.pread
            try:
                return [None if fd < 0 else pread(fd, _READ, 0) for fd in fds]
            except OSError:
                pass
        out: list[bytes | None] = []
        ok = True
        for dev in self._devices:
            for f in dev.files:
                if f is None:
                    out.append(None)
                    continue
                try:
                    out.append(f.read())
                except OSError as e:
                    out.append(f"!{e.strerror or e}".encode())  # a marker no driver file holds
                    ok = False
        try:
            self._fds = [-1 if f is None else f.fileno() for dev in self._devices for f in dev.files] if ok else None
        except OSError:
            self._fds = None
        if not ok:  # a file vanished or failed (moved?): find the devices' files again at the next poll
            self._replan = True  # (`_listed` stays: `sources` still names what the plan found)
        return out

    def _signals(self, listed: tuple[int, ...], raw: list[bytes | None]) -> list[H.DeviceSignals]:
        out: list[H.DeviceSignals] = []
        width = len(_FILES)
        for n, dev in enumerate(self._devices):
            values: dict[str, Any] = {}
            unreadable: list[str] = []
            for (name, _), data in zip(_FILES, raw[n * width : (n + 1) * width], strict=True):
                if data is None:
                    continue
                try:
                    if data.startswith(b"!"):
                        raise ValueError(data[1:].decode("ascii", "replace"))
                    if name == "unhealthy_components":
                        values[name] = tuple(parse_unhealthy_components(data))
                    elif name == "power/utilization":
                        values[name] = parse_power(data).status
                    else:
                        values[name] = parse_count(data)
                except ValueError:
                    unreadable.append(name)
            out.append(
                H.DeviceSignals(
                    dev.index,
                    expected=True,
                    unhealthy_components=values.get("unhealthy_components"),
                    hw_error_events=values.get("hw_error_event"),
                    mem_ecc_uncorrected=values.get("mem_ecc_uncorrected"),
                    sram_ecc_uncorrected=values.get("sram_ecc_uncorrected"),
                    mem_ecc_repairable=values.get("mem_ecc_repairable_uncorrected"),
                    power_status=values.get("power/utilization"),
                    unreadable=tuple(unreadable),
                    missing=dev.missing,
                )
            )
        for index in sorted((self.expected | set(self.verdicts)) - set(listed)):
            out.append(H.DeviceSignals(index, present=False, expected=index in self.expected))
        return out

    def _poll(self) -> bool:
        """Read the signals; update verdicts and the ledger. True when anything a report shows changed."""
        listed = self._list_devices()
        if listed != self._listed or self._replan:
            self._replan = False
            self._plan(listed)
            self.expected |= set(listed)
        raw = self._read_raw()
        if self._last_raw is not None and self._last_raw[1] == raw and self._last_raw[0] == listed:
            return False
        self._last_raw = (listed, raw)
        now = self.clock()
        changed = False
        states: list[str] = []
        for s in self._signals(listed, raw):
            findings = H.evaluate(s)
            old = self.verdicts.get(s.index)
            if not s.present and not s.expected:
                self.verdicts.pop(s.index, None)
                continue
            new = H.track(old, findings, now)
            if old is None or old.state != new.state or [f.key for f in old.findings] != [f.key for f in new.findings]:
                changed = True
            self.verdicts[s.index] = new
            states.append(new.state)
            if self.ledger.observe(s, now):
                changed = True
        node_state = H.node_state(states)
        if self.node is None or self.node.state != node_state:
            self.node = H.Verdict(node_state, now)
            changed = True
        if self.ledger.changed:
            self._save_ledger()
        return changed

    # -- the scheduler's calls ---------------------------------------------------------------------------------
    def _poll_or_fail(self) -> bool:
        """`_poll`, or when no descriptor was left to read with (`OutOfDescriptors`): nothing observed, no event
        counted, no device taken for lost; ``_failed`` holds why until a poll succeeds, and the collection reports
        every verdict ``unknown`` meanwhile. True when a report should go out (a change either way)."""
        try:
            changed = self._poll()
        except OutOfDescriptors as e:
            was, self._failed = self._failed, str(e)
            self._last_raw = None  # read everything again once descriptors are back
            return not was
        if self._failed:
            self._failed = ""
            return True
        return changed

    def prime(self) -> None:
        self._poll_or_fail()

    def watch(self) -> bool:
        """The fast watch: True when a report should go out now (a verdict, finding or fault count changed)."""
        changed = self._poll_or_fail()
        self._changed = self._changed or changed
        return changed

    def collect(self) -> dict[str, Any]:
        self._poll_or_fail()
        self._changed = False
        if self._failed:
            return self._unknown_body(self._failed)
        events = self.ledger.drain()
        if events:  # handed out only once the state saying so is saved: a restart never hands them out again
            self.ledger.changed = True
            if not self._save_ledger(force=True):
                self.ledger.hold(events)
                events = {}
        devices: list[DeviceHealth] = []
        counts = dict.fromkeys(H.STATES, 0)
        for index in sorted(self.verdicts):
            v = self.verdicts[index]
            counts[v.state] += 1
            new: dict[str, FaultEvent] = {
                kind: {B.COUNT: c, B.FIRST_SEEN: t} for (d, kind), (c, t) in events.items() if d == index
            }
            entry: DeviceHealth = {
                B.DEVICE_INDEX: index,
                B.HEALTH: _verdict_object(v),
                B.FAULT_EVENTS: new,
                B.FAULT_TOTALS: self._totals(index),
            }
            devices.append(entry)
        node = self.node or H.Verdict(H.UNKNOWN, self.clock())
        body: NeuronDeviceHealthBody = {
            B.NODE: {
                B.STATE: node.state,
                B.SINCE: node.since,
                B.DEVICE_STATES: counts,
                B.EXPECTED_DEVICES: len(self.expected),
                B.INSTANCE_TYPE: self.instance_type,
            },
            B.NEURON_DEVICES: devices,
            B.WATCH_INTERVAL: self.watch_interval,
        }
        errors = self.ledger.take_problems()
        if self._load_error:
            errors.insert(0, self._load_error)
            self._load_error = ""
        if self._state_error:
            held = sum(c for c, _ in self.ledger.drain_view().values())
            errors.append(self._state_error + (f"; {held} fault events held until it is saved" if held else ""))
        if errors:
            body[B.ERROR] = "; ".join(errors)
        return cast("dict[str, Any]", body)  # SystemGroup.collect's plain dict (no copy)

    def _totals(self, index: int) -> dict[str, FaultTotal]:
        """Every fault event counted so far on device ``index``, by kind."""
        return {
            kind: {B.COUNT: t.count, B.FIRST_SEEN: t.first_seen, B.LAST_SEEN: t.last_seen}
            for (d, kind), t in sorted(self.ledger.totals.items())
            if d == index
        }

    def _unknown_body(self, why: str) -> dict[str, Any]:
        """The body while the devices cannot be read: node and every known device ``unknown`` (the verdict needed
        a source that could not be read), totals kept, no new event; ``error`` says why."""
        now = self.clock()
        indexes = sorted(set(self.verdicts) | self.expected)
        devices: list[DeviceHealth] = [
            {
                B.DEVICE_INDEX: index,
                B.HEALTH: {B.STATE: H.UNKNOWN, B.SINCE: now, B.REASONS: []},
                B.FAULT_EVENTS: {},
                B.FAULT_TOTALS: self._totals(index),
            }
            for index in indexes
        ]
        counts = dict.fromkeys(H.STATES, 0)
        counts[H.UNKNOWN] = len(devices)
        body: NeuronDeviceHealthBody = {
            B.NODE: {
                B.STATE: H.UNKNOWN,
                B.SINCE: now,
                B.DEVICE_STATES: counts,
                B.EXPECTED_DEVICES: len(self.expected),
                B.INSTANCE_TYPE: self.instance_type,
            },
            B.NEURON_DEVICES: devices,
            B.WATCH_INTERVAL: self.watch_interval,
            B.ERROR: "; ".join(e for e in (why, self._state_error) if e),
        }
        return cast("dict[str, Any]", body)

    def sources(self) -> dict[str, Any]:
        return self.tree.sources(self._listed or ())

    def close(self) -> None:
        self._close_devices()
        self._fds = None
        self._listed = None
        if self._class_fd is not None:
            os.close(self._class_fd)
            self._class_fd = None


def _devices_in(names: list[str]) -> tuple[int, ...]:
    return tuple(sorted(int(n[6:]) for n in names if n.startswith("neuron") and n[6:].isdigit()))


def _verdict_object(v: H.Verdict) -> Health:
    return {
        B.STATE: v.state,
        B.SINCE: v.since,
        B.REASONS: [
            {B.RULE: f.rule, B.SEVERITY: f.severity, B.DETAIL: f.detail, B.MESSAGE: f.message, B.SINCE: f.since}
            for f in v.findings
        ],
    }


GROUP = NeuronDeviceHealth
