"""Device fault events, each counted once: from the driver's cumulative counters and from transitions.

`FaultLedger.observe` takes one device's `DeviceSignals` (rules.py) at a wall time and counts what is new
since the previous observation of that device:

- ``ecc_uncorrected``: growth of ``mem_ecc_uncorrected`` + ``sram_ecc_uncorrected``;
- ``ecc_repairable``: growth of ``mem_ecc_repairable_uncorrected``;
- ``hw_error``: growth of ``health_status/hw_error_event``;
- ``health_component``: each component that appears in ``unhealthy_components``;
- ``device_lost``: a device that was listed (or that the instance type has) and is no longer listed.

A counter that goes down was reset (driver reload, device reset): its new value is all new events. `drain` hands
out what no report has carried yet (``{(device, kind): (count, first_seen)}``), `totals` what was ever counted.
`to_state`/`from_state` carry the ledger across restarts (the daemon's ``--state-dir``): a restart on the same
boot counts only what grew while the daemon was down; after a reboot (another ``boot_id``) the driver's counters
started again from zero, so their values are all new.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from neuron_monitor.groups.neuron_device_health.rules import DEVICE_UNREACHABLE, DeviceSignals

ECC_UNCORRECTED: Final = "ecc_uncorrected"
ECC_REPAIRABLE: Final = "ecc_repairable"
HW_ERROR: Final = "hw_error"
HEALTH_COMPONENT: Final = "health_component"
DEVICE_LOST: Final = "device_lost"
KINDS: Final = (ECC_UNCORRECTED, ECC_REPAIRABLE, HW_ERROR, HEALTH_COMPONENT, DEVICE_LOST)
STATE_VERSION: Final = 1
MAX_DEVICES: Final = 1024  # a state file naming more is not ours


@dataclass(slots=True)
class Total:
    """Events of one kind on one device: how many, first and last seen (wall seconds)."""

    count: int
    first_seen: float
    last_seen: float


def _grown(before: int | None, now: int | None) -> int:
    if now is None:
        return 0
    if before is None:
        return now
    return now - before if now >= before else now  # went down: reset, everything is new


class FaultLedger:
    """Counts fault events per (device, kind) exactly once (see the module docstring)."""

    def __init__(self, count_existing: bool = False) -> None:
        # count_existing: a device's first observation counts the counters' values (events nobody counted yet);
        # otherwise it is only a baseline
        self.count_existing = count_existing
        self._raw: dict[int, tuple[int | None, int | None, int | None]] = {}  # ecc_unc, repairable, hw_error
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
        unc = None
        if s.mem_ecc_uncorrected is not None or s.sram_ecc_uncorrected is not None:
            unc = (s.mem_ecc_uncorrected or 0) + (s.sram_ecc_uncorrected or 0)
        raw = (unc, s.mem_ecc_repairable, s.hw_error_events)
        components = frozenset(c for c in (s.unhealthy_components or ()) if c != DEVICE_UNREACHABLE)
        old = self._raw.get(device)
        if old is None and not self.count_existing:
            old = raw  # a baseline: nothing counted
        old_components = self._components.get(device, frozenset() if self.count_existing else components)
        for kind, b, n in zip((ECC_UNCORRECTED, ECC_REPAIRABLE, HW_ERROR), old or (None,) * 3, raw, strict=True):
            if n is not None:
                self._add(device, kind, _grown(b, n), now)
        self._add(device, HEALTH_COMPONENT, len(components - old_components), now)
        # an unreadable counter (None) keeps its last value, so a read failure counts nothing twice
        b0, b1, b2 = old or (None, None, None)
        self._raw[device] = (raw[0] if raw[0] is not None else b0, raw[1] if raw[1] is not None else b1,
                             raw[2] if raw[2] is not None else b2)  # fmt: skip
        if s.unhealthy_components is not None:
            self._components[device] = components
        return self._counted != before

    def drain(self) -> dict[tuple[int, str], tuple[int, float]]:
        """The events no report carried yet, and forget them: ``{(device, kind): (count, first_seen)}``."""
        out, self._pending = self._pending, {}
        return out

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    # -- across restarts ---------------------------------------------------------------------------------------
    def to_state(self, boot_id: str) -> dict[str, Any]:
        self.changed = False
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
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise ValueError("not a fault-event state of this version")
        ledger = cls(count_existing=True)
        try:
            for key, (count, first, last) in _items(state, "totals"):
                device, kind = _key(key)
                ledger.totals[(device, kind)] = Total(int(count), float(first), float(last))
            for key, (count, first) in _items(state, "pending"):
                device, kind = _key(key)
                ledger._pending[(device, kind)] = (int(count), float(first))
            if state.get("boot_id") == boot_id:  # "" on both sides: unknown, a reset still shows as a drop
                for key, values in _items(state, "raw"):
                    a, b, c = (None if x is None else int(x) for x in values)
                    ledger._raw[_device(key)] = (a, b, c)
                for key, names in _items(state, "components"):
                    ledger._components[_device(key)] = frozenset(str(n) for n in names)
                for key, present in _items(state, "present"):
                    ledger._present[_device(key)] = bool(present)
        except (TypeError, ValueError) as e:
            raise ValueError(f"malformed fault-event state: {e}") from None
        return ledger


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
