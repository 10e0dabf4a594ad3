"""Device fault events, each counted once: from the driver's cumulative counters and from transitions.

`FaultLedger.observe` takes one device's `DeviceSignals` (rules.py) at a wall time and counts what is new
since the previous observation of that device:

- ``ecc_uncorrected``: growth of ``mem_ecc_uncorrected`` + ``sram_ecc_uncorrected``;
- ``ecc_repairable``: growth of ``mem_ecc_repairable_uncorrected``;
- ``hw_error``: growth of ``health_status/hw_error_event``;
- ``health_component``: each component that appears in ``unhealthy_components``;
- ``device_lost``: a device that was listed (or that the instance type has) and is no longer listed.

Each counter becomes counts by the project's one rule (util/counters.py; its sources in neuron/plausible.py): a
counter that goes down was reset (driver reload, device reset) and its new value is all new events, unless it went
to exactly 0 (what the driver prints when its firmware read fails: no count, the next read is a baseline); a step
past what the counter can make, or a value past what it holds, is refused (`problems`) and the next good read is a
baseline, as is the first good read after an unreadable one. `drain` hands out what no report has carried yet
(``{(device, kind): (count, first_seen)}``), `totals` what was ever counted. `to_state`/`from_state` carry the
ledger across restarts (the daemon's ``--state-dir``): a restart on the same boot counts only what grew while the
daemon was down; after a reboot (another ``boot_id``) the driver's counters started again from zero, so their
values are all new. `from_state` checks every value against bounds (`MAX_COUNT`, times within `TIME_RANGE`) and
refuses the whole state otherwise: a ledger that lies is worse than one that starts over.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

from neuron_monitor.groups.neuron_device_health.body import (
    DEVICE_LOST,
    ECC_REPAIRABLE,
    ECC_UNCORRECTED,
    FAULT_KINDS,
    HEALTH_COMPONENT,
    HW_ERROR,
)
from neuron_monitor.groups.neuron_device_health.rules import DEVICE_UNREACHABLE, DeviceSignals
from neuron_monitor.neuron.plausible import ECC_SOURCES, HW_ERROR_EVENTS
from neuron_monitor.util.counters import Source, step

KINDS: Final = FAULT_KINDS  # the kinds, in report order: defined once in body.py
STATE_VERSION: Final = 2  # 2: the uncorrected ECC counts kept apart (HBM, SRAM), values checked on load
MAX_DEVICES: Final = 1024  # a state file naming more is not ours
MAX_PROBLEMS: Final = 64  # refused readings kept between two collections (the rest are not named)
MAX_COUNT: Final = 1 << 53  # a total or pending count past this is not one we counted (exact as a double)
TIME_RANGE: Final = (0.0, 4102444800.0)  # wall seconds a first/last seen may hold: 1970 to 2100
# the cumulative counters the ledger follows, in its raw tuple's order, and the kind each one counts
RAW: Final = ("mem_ecc_uncorrected", "sram_ecc_uncorrected", "mem_ecc_repairable_uncorrected", "hw_error_event")
RAW_KINDS: Final = (ECC_UNCORRECTED, ECC_UNCORRECTED, ECC_REPAIRABLE, HW_ERROR)
RAW_SOURCES: Final[tuple[Source, ...]] = (*(ECC_SOURCES[n] for n in RAW[:3]), HW_ERROR_EVENTS)
RAW_TOPS: Final = tuple(src.top for src in RAW_SOURCES)
Raw = tuple[int | None, int | None, int | None, int | None]
_NO_RAW: Final[Raw] = (None, None, None, None)


@dataclass(slots=True)
class Total:
    """Events of one kind on one device: how many, first and last seen (wall seconds)."""

    count: int
    first_seen: float
    last_seen: float


class FaultLedger:
    """Counts fault events per (device, kind) exactly once (see the module docstring)."""

    def __init__(self, count_existing: bool = False) -> None:
        # count_existing: a device's first observation counts the counters' values (events nobody counted yet);
        # otherwise it is only a baseline
        self.count_existing = count_existing
        self._raw: dict[int, Raw] = {}  # per device: the baselines of the RAW counters (None: the next read is one)
        self._seen_at: dict[int, float] = {}  # per device: when its counters were last read
        self.problems: list[str] = []  # refused readings since the last `take_problems`
        self._components: dict[int, frozenset[str]] = {}
        self._present: dict[int, bool] = {}
        self.totals: dict[tuple[int, str], Total] = {}
        self._pending: dict[tuple[int, str], tuple[int, float]] = {}
        self.changed = False  # totals changed since the last `to_state`
        self._counted = 0  # events counted, ever (to tell whether an observation counted any)

    def _add(self, device: int, kind: str, count: int, now: float) -> None:
        if count <= 0:
            return
        total = self.totals.get((device, kind))
        if total is None:
            self.totals[(device, kind)] = Total(count, now, now)
        else:
            total.count += count
            total.last_seen = now
        pending = self._pending.get((device, kind))
        self._pending[(device, kind)] = (count + pending[0], pending[1]) if pending else (count, now)
        self._counted += count
        self.changed = True

    def observe(self, s: DeviceSignals, now: float) -> bool:
        """Count what is new on device ``s.index``; True when any event was counted."""
        before = self._counted
        device = s.index
        was_present = self._present.get(device)
        if not s.present:
            seen_going = was_present is True or (was_present is None and self.count_existing)
            if s.expected and seen_going:
                self._add(device, DEVICE_LOST, 1, now)
            self._present[device] = False
            return self._counted != before
        self._present[device] = True
        raw: Raw = (s.mem_ecc_uncorrected, s.sram_ecc_uncorrected, s.mem_ecc_repairable, s.hw_error_events)
        components = frozenset(c for c in (s.unhealthy_components or ()) if c != DEVICE_UNREACHABLE)
        old = self._raw.get(device)
        if old is None:  # a device's first observation: a baseline, or from 0 when the driver's counts are new
            old = (0, 0, 0, 0) if self.count_existing else _NO_RAW
        last = self._seen_at.get(device)
        dt = 0.0 if last is None else max(0.0, now - last)
        self._seen_at[device] = now
        old_components = self._components.get(device, frozenset() if self.count_existing else components)
        kept: list[int | None] = []
        for name, kind, src, b, n in zip(RAW, RAW_KINDS, RAW_SOURCES, old, raw, strict=True):
            count, baseline, problem = step(b, n, dt, src)
            kept.append(baseline)
            if problem is not None and len(self.problems) < MAX_PROBLEMS:
                self.problems.append(f"neuron_device {device} {name}: {problem}")
            if count:
                self._add(device, kind, count, now)
        self._add(device, HEALTH_COMPONENT, len(components - old_components), now)
        self._raw[device] = (kept[0], kept[1], kept[2], kept[3])
        if s.unhealthy_components is not None:
            self._components[device] = components
        return self._counted != before

    def drain(self) -> dict[tuple[int, str], tuple[int, float]]:
        """The events no report carried yet, and forget them: ``{(device, kind): (count, first_seen)}``."""
        out, self._pending = self._pending, {}
        return out

    def drain_view(self) -> dict[tuple[int, str], tuple[int, float]]:
        """The events no report carried yet, left pending."""
        return dict(self._pending)

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def take_problems(self) -> list[str]:
        """The readings refused since the last call (for the group's ``error``), and forget them."""
        out, self.problems = self.problems, []
        return out

    # -- across restarts ---------------------------------------------------------------------------------------
    def hold(self, events: dict[tuple[int, str], tuple[int, float]]) -> None:
        """Put drained ``events`` back as pending (their report could not be made durable first)."""
        for key, (count, first) in events.items():
            pending = self._pending.get(key)
            self._pending[key] = (count + pending[0], min(first, pending[1])) if pending else (count, first)

    def to_state(self, boot_id: str) -> dict[str, Any]:
        """The ledger as JSON-ready data (the caller clears `changed` once it is saved)."""
        return {
            "version": STATE_VERSION,
            "boot_id": boot_id,
            "raw": {str(d): list(v) for d, v in self._raw.items()},
            "components": {str(d): sorted(c) for d, c in self._components.items()},
            "present": {str(d): p for d, p in self._present.items()},
            "totals": {f"{d}/{k}": [t.count, t.first_seen, t.last_seen] for (d, k), t in self.totals.items()},
            "pending": {f"{d}/{k}": [c, t] for (d, k), (c, t) in self._pending.items()},
        }

    @classmethod
    def from_state(cls, state: Any, boot_id: str) -> FaultLedger:
        """A ledger from `to_state`'s output; ValueError when it is not one. After a reboot (another boot_id)
        the driver's counters restarted: the totals carry on, the counters' last values are dropped."""
        version = state.get("version") if isinstance(state, dict) else None
        if not isinstance(state, dict) or version not in (1, STATE_VERSION) or type(version) is not int:
            raise ValueError("not a fault-event state of this version")
        ledger = cls(count_existing=True)
        try:
            for key, value in _items(state, "totals"):
                device, kind = _key(key)
                count, first, last = _triple(value)
                ledger.totals[(device, kind)] = Total(_count(count), _time(first), _time(last))
            for key, value in _items(state, "pending"):
                device, kind = _key(key)
                count, first = _pair(value)
                ledger._pending[(device, kind)] = (_count(count), _time(first))
            if state.get("boot_id") == boot_id:  # "" on both sides: unknown, a reset still shows as a drop
                for key, values in _items(state, "raw"):
                    if version == 1 and isinstance(values, list) and len(values) == 3:  # unc. sum, repairable, hw
                        values = [None, None, values[1], values[2]]  # the sum cannot be split: a baseline next
                    ledger._raw[_device(key)] = _raw(values)
                for key, names in _items(state, "components"):
                    if not isinstance(names, list) or len(names) > 64:
                        raise ValueError(f"components of {key[:20]}")
                    ledger._components[_device(key)] = frozenset(str(n)[:64] for n in names)
                for key, present in _items(state, "present"):
                    if not isinstance(present, bool):
                        raise ValueError(f"present of {key[:20]}")
                    ledger._present[_device(key)] = present
        except (TypeError, ValueError) as e:
            raise ValueError(f"malformed fault-event state: {e}") from None
        return ledger


def _triple(value: Any) -> tuple[Any, Any, Any]:
    if not isinstance(value, list) or len(value) != 3:
        raise ValueError("a total is [count, first_seen, last_seen]")
    return value[0], value[1], value[2]


def _pair(value: Any) -> tuple[Any, Any]:
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError("a pending entry is [count, first_seen]")
    return value[0], value[1]


def _count(value: Any) -> int:
    """A count from a state: an int (not a bool, not a float) in 1..MAX_COUNT."""
    if type(value) is not int or not 0 < value <= MAX_COUNT:
        raise ValueError(f"count {str(value)[:24]} (an integer in 1..2^53)")
    return value


def _time(value: Any) -> float:
    """A wall time from a state: a finite number within TIME_RANGE."""
    if type(value) not in (int, float) or not math.isfinite(value) or not TIME_RANGE[0] <= value <= TIME_RANGE[1]:
        raise ValueError(f"time {str(value)[:24]}")
    return float(value)


def _raw(values: Any) -> Raw:
    """A device's counter baselines from a state: four values, each null or an int within its counter's top."""
    if not isinstance(values, list) or len(values) != len(RAW):
        raise ValueError(f"raw is {len(RAW)} values")
    out: list[int | None] = []
    for name, top, v in zip(RAW, RAW_TOPS, values, strict=True):
        if v is not None and (type(v) is not int or not 0 <= v <= top):
            raise ValueError(f"{name} {str(v)[:24]} (an integer in 0..{top})")
        out.append(v)
    return out[0], out[1], out[2], out[3]


def _items(state: dict[str, Any], name: str) -> list[tuple[str, Any]]:
    part = state.get(name, {})
    if not isinstance(part, dict) or len(part) > MAX_DEVICES * len(KINDS):
        raise ValueError(name)
    return list(part.items())


def _device(text: str) -> int:
    device = int(text)
    if not 0 <= device < MAX_DEVICES:
        raise ValueError(f"device {text[:20]}")
    return device


def _key(text: str) -> tuple[int, str]:
    device, _, kind = text.partition("/")
    if kind not in KINDS:
        raise ValueError(f"kind {kind[:40]}")
    return _device(device), kind
