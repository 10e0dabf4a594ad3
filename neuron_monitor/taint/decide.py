"""When a device gets a taint and when it loses it: pure decisions over the health verdicts seen, by the clock.

`Planner.observe` takes the verdicts of one report (device index -> state and the rule that fired); `Planner.plan`
turns them, with the index -> DRA device mapping and the rules this node holds, into the changes to make:

- a device ``unhealthy`` without a break for ``grace`` seconds gets a rule (value: the first unhealthy rule);
- a rule whose device has been ``healthy`` without a break for ``hold`` seconds is deleted;
- ``unknown`` (or a device missing from the report) breaks both runs: it never taints and never clears;
- a rule whose effect is not the configured one is updated (e.g. from the trial run ``None`` to ``NoSchedule``);
- at most ``node_cap`` devices of the node hold a rule unless ``confirm(index)`` (an independent read of the
  device's health) says the device is unhealthy too; the others are refused (``node_cap``);
- a device with no DRA name is refused (``unmapped``) and named.

`RateLimit` bounds how many changes are made per minute; the caller asks it before each change.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from neuron_monitor.taint.rules import DeviceKey, OwnRule

HEALTHY, UNHEALTHY, UNKNOWN = "healthy", "unhealthy", "unknown"


@dataclass
class Track:
    """One device's current run: since when (the planner's clock) it has been unhealthy or healthy, and why."""

    unhealthy_since: float | None = None
    healthy_since: float | None = None
    rule: str = ""


@dataclass(frozen=True)
class Change:
    """One write: ``create`` (a rule for ``key``), ``delete`` or ``update`` (``rule``, this node's existing one)."""

    action: str
    key: DeviceKey
    index: int | None = None
    value: str = ""
    rule: OwnRule | None = None


@dataclass(frozen=True)
class Refusal:
    reason: str  # unmapped, node_cap
    index: int
    value: str


@dataclass
class Plan:
    changes: list[Change] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)


class RateLimit:
    """At most ``per_minute`` changes in any 60 s (a sliding window of the changes made)."""

    def __init__(self, per_minute: int, window: float = 60.0) -> None:
        self.per_minute = per_minute
        self.window = window
        self._made: deque[float] = deque()

    def allow(self, now: float) -> bool:
        while self._made and now - self._made[0] >= self.window:
            self._made.popleft()
        if len(self._made) >= self.per_minute:
            return False
        self._made.append(now)
        return True


class Planner:
    def __init__(self, grace: float, hold: float, node_cap: int, effect: str) -> None:
        self.grace = grace
        self.hold = hold
        self.node_cap = node_cap
        self.effect = effect
        self.tracks: dict[int, Track] = {}

    def observe(self, verdicts: dict[int, tuple[str, str]], now: float) -> None:
        """Record one report's verdicts: index -> (state, the first unhealthy rule or "")."""
        for index in set(self.tracks) - set(verdicts):  # not in this report: cannot be told (and kept no longer)
            del self.tracks[index]
        for index, (state, rule) in verdicts.items():
            track = self.tracks.setdefault(index, Track())
            if state == UNHEALTHY:
                track.healthy_since = None
                if track.unhealthy_since is None:
                    track.unhealthy_since = now
                    track.rule = rule or "unhealthy"
            elif state == HEALTHY:
                track.unhealthy_since = None
                if track.healthy_since is None:
                    track.healthy_since = now
            else:
                track.unhealthy_since = track.healthy_since = None

    def due(self, index: int, now: float) -> bool:
        """The device has been unhealthy for the grace period."""
        track = self.tracks.get(index)
        return track is not None and track.unhealthy_since is not None and now - track.unhealthy_since >= self.grace

    def plan(
        self,
        now: float,
        mapping: dict[int, DeviceKey],
        rules: dict[DeviceKey, OwnRule],
        confirm: Callable[[int], bool] | None = None,
    ) -> Plan:
        """The changes due now, deletions first (a freed device is never the risk), then updates, then creations."""
        out = Plan()
        index_of = {key: index for index, key in mapping.items()}
        for key, rule in sorted(rules.items()):
            index = index_of.get(key)
            track = self.tracks.get(index) if index is not None else None
            if track is not None and track.healthy_since is not None and now - track.healthy_since >= self.hold:
                out.changes.append(Change("delete", key, index, rule=rule))
        deleting = {c.key for c in out.changes}
        for key, rule in sorted(rules.items()):
            if key not in deleting and rule.effect != self.effect:
                out.changes.append(Change("update", key, index_of.get(key), rule.value, rule))
        held = len(rules) - len(deleting)
        for index in sorted(self.tracks):
            if not self.due(index, now):
                continue
            value = self.tracks[index].rule
            mapped = mapping.get(index)
            if mapped is None:
                out.refused.append(Refusal("unmapped", index, value))
                continue
            if mapped in rules:
                continue
            if held >= self.node_cap and (confirm is None or not confirm(index)):
                out.refused.append(Refusal("node_cap", index, value))
                continue
            held += 1
            out.changes.append(Change("create", mapped, index, value))
        return out
