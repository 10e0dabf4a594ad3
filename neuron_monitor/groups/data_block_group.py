"""Base of the runtime groups computed from each application's data-block readings (neuron/apps.py).

Each such group keeps per-pid baselines in a `DeltaTracker`; `collect` returns one body per present application
(``_body``; None leaves the app out) and a final body for each departed one, whose state is then dropped.
`_period` gives a body's ``period`` from its deltas. A block value past what the hardware can count
(`ImplausibleDelta` from the tracker, `ImplausibleValue` from a group: neuron/plausible.py) makes that application's
body ``{"error": ...}`` for the period; the other applications are not affected.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from itertools import chain
from typing import Any

from neuron_monitor.groups.base import RuntimeGroup
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.app import App
from neuron_monitor.neuron.deltas import DeltaTracker, DeviceDelta, ImplausibleDelta
from neuron_monitor.util.errors import GroupError


class ImplausibleValue(GroupError):
    """A value of an application's data block is past what the hardware holds (neuron/plausible.py)."""


class DataBlockGroup(RuntimeGroup):
    def __init__(self, root: RootFS, tracker: DeltaTracker) -> None:
        super().__init__(root)
        self._tracker = tracker
        self._rounded = (0.0, 0.0)  # the last interval `_period` rounded, and its rounding

    def _period(self, steps: list[DeviceDelta]) -> float | None:
        """A body's ``period``: the longest interval between the two readings of its devices, rounded to the
        nanosecond; None when no device has an interval. The applications of one collection usually share the
        interval (their blocks are read at one time), so the last rounding is kept and reused for an equal one."""
        dt = steps[0][2] if len(steps) == 1 else max([step[2] for step in steps], default=0.0)
        return self.period_of(dt)

    @property
    def tracker(self) -> DeltaTracker:
        """This group's delta tracker (its per-pid baselines)."""
        return self._tracker

    def period_of(self, dt: float) -> float | None:
        """`_period` of an interval of ``dt`` seconds."""
        if dt <= 0:
            return None
        last, rounded = self._rounded
        if dt != last:
            rounded = round(dt, 9)
            self._rounded = (dt, rounded)
        return rounded

    @abstractmethod
    def _body(self, app: App) -> dict[str, Any] | None:
        """This app's body from its newest reading, or None when there is nothing to report."""

    def _forget(self, pid: int) -> None:
        """Drop a departed app's state (after its final body)."""
        self._tracker.forget(pid)

    def collect(self, apps: Sequence[App], gone: Sequence[App]) -> dict[int, dict[str, Any]]:
        out: dict[int, dict[str, Any]] = {}
        for app in chain(apps, gone):  # the departed apps' final bodies too
            try:  # free in the usual case (no call added per application)
                body = self._body(app)
            except (ImplausibleDelta, ImplausibleValue) as e:
                body = {"error": str(e)}
            if body is not None:
                out[app.pid] = body
        for app in gone:
            self._forget(app.pid)
        return out
