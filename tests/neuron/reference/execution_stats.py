"""Runtime group ``execution_stats``: execution outcomes, errors and latency percentiles of each application.

Reads the per-core NC counters of the app's data blocks (neuron/apps.py). ``execution_summary`` and
``error_summary`` are the changes of the counters mapped in neuron/layout.py (EXECUTION_SUMMARY, ERROR_SUMMARY)
over the group's period, summed over the app's cores, each counted once. ``latency_stats``: the data block holds
only the latency of each core's most recent execution (NC counters 13 device, 14 total, µs); every core that
executed during the period contributes that sample, and p0..p100 are nearest-rank percentiles of the samples, in
seconds. Both are ``null`` when nothing ran in the period (see docs/neuron-data.md for the limits of this).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from neuron_monitor.groups.base import RuntimeGroup
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.app import App
from tests.neuron.reference.deltas import DeltaTracker

_EXEC = tuple(c for _, c in L.EXECUTION_SUMMARY)
_ERR = tuple(c for _, c in L.ERROR_SUMMARY)
_INDICES = _EXEC + _ERR
_N_EXEC = len(_EXEC)
PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p0", 0.0), ("p1", 1.0), ("p100", 100.0), ("p25", 25.0), ("p50", 50.0), ("p75", 75.0), ("p99", 99.0),
)  # fmt: skip


def percentiles(samples: list[float]) -> dict[str, float] | None:
    """Nearest-rank percentiles of ``samples`` in AWS's key order; None without samples."""
    if not samples:
        return None
    ordered = sorted(samples)
    n = len(ordered)
    return {name: ordered[max(0, math.ceil(p / 100.0 * n) - 1)] for name, p in PERCENTILES}


class ExecutionStats(RuntimeGroup):
    type_name = "execution_stats"

    def __init__(self, root: RootFS) -> None:
        super().__init__(root)
        self._tracker = DeltaTracker()

    def _body(self, app: App) -> dict[str, Any]:
        totals = [0] * len(_INDICES)
        device_lat: list[float] = []
        total_lat: list[float] = []
        period = 0.0
        for dd in self._tracker.step(app, _INDICES):
            period = max(period, dd.dt)
            for core, deltas in dd.deltas.items():
                for i, v in enumerate(deltas):
                    totals[i] += v
                if any(deltas[:_N_EXEC]):
                    counters = dd.data.reading.nc[core]
                    if counters[L.NC_LATENCY_DEVICE]:
                        device_lat.append(counters[L.NC_LATENCY_DEVICE] / 1e6)
                    if counters[L.NC_LATENCY_TOTAL]:
                        total_lat.append(counters[L.NC_LATENCY_TOTAL] / 1e6)
        body: dict[str, Any] = {
            "error_summary": {name: totals[_N_EXEC + i] for i, (name, _) in enumerate(L.ERROR_SUMMARY)},
            "execution_summary": {name: totals[i] for i, (name, _) in enumerate(L.EXECUTION_SUMMARY)},
            "latency_stats": {"total_latency": percentiles(total_lat), "device_latency": percentiles(device_lat)},
        }
        if period > 0:
            body["period"] = round(period, 9)
        return body

    def collect(self, apps: Sequence[App], gone: Sequence[App]) -> dict[int, dict[str, Any]]:
        out = {app.pid: self._body(app) for app in apps}
        for app in gone:
            out[app.pid] = self._body(app)
            self._tracker.forget(app.pid)
        return out


GROUP = ExecutionStats
