"""Runtime group ``execution_stats``: execution outcomes, errors and latency percentiles of each application.

Reads the per-core NC counters of the app's data blocks (neuron/apps.py). ``execution_summary`` and
``error_summary`` are the changes of the counters mapped in neuron/layout.py (EXECUTION_SUMMARY, ERROR_SUMMARY)
over the group's period, summed over the app's cores, each counted once. ``latency_stats``: the data block holds
only the latency of each core's most recent execution (NC counters 13 device, 14 total, µs); every core that
executed during the period contributes that sample, and p0..p100 are nearest-rank percentiles of the samples, in
seconds. Both are ``null`` when nothing ran in the period (see docs/neuron-data.md for the limits of this).
The body's keys: body.py.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable
from functools import lru_cache
from itertools import compress
from operator import add, itemgetter
from typing import Any

from neuron_monitor.groups.data_block_group import DataBlockGroup
from neuron_monitor.groups.execution_stats import body as B
from neuron_monitor.groups.execution_stats.body import LatencyStats
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.native import NATIVE
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.app import App
from neuron_monitor.neuron.datablock import N
from neuron_monitor.neuron.deltas import DeltaTracker, DeviceDelta, Picker, picker

_EXEC = tuple(c for _, c in L.EXECUTION_SUMMARY)
_ERR = tuple(c for _, c in L.ERROR_SUMMARY)
_INDICES = _EXEC + _ERR
_N_EXEC = len(_EXEC)
_ZEROS = (0,) * len(_INDICES)
_EXEC_NAMES = tuple(name for name, _ in L.EXECUTION_SUMMARY)
_ERR_NAMES = tuple(name for name, _ in L.ERROR_SUMMARY)
PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p0", 0.0), ("p1", 1.0), ("p100", 100.0), ("p25", 25.0), ("p50", 50.0), ("p75", 75.0), ("p99", 99.0),
)  # fmt: skip
_PERCENTILE_NAMES = tuple(name for name, _ in PERCENTILES)
_PERCENTILE_VALUES = tuple(p for _, p in PERCENTILES)
# the names summary_native hands the helper: execution and error counts, percentile names and values
SUMMARY_NAMES = (_EXEC_NAMES, _ERR_NAMES, _PERCENTILE_NAMES, _PERCENTILE_VALUES)


@lru_cache(maxsize=256)
def _ranks(n: int) -> Callable[[list[float]], tuple[float, ...]]:
    """Picks the nearest-rank PERCENTILES from ``n`` ordered samples."""
    return itemgetter(*(max(0, math.ceil(p / 100.0 * n) - 1) for _, p in PERCENTILES))


def percentiles(samples: list[float]) -> dict[str, float] | None:
    """Nearest-rank percentiles of ``samples`` in AWS's key order; None without samples."""
    if not samples:
        return None
    ordered = sorted(samples)
    return dict(zip(_PERCENTILE_NAMES, _ranks(len(ordered))(ordered), strict=True))


class ExecutionStats(DataBlockGroup):
    type_name = "execution_stats"

    def __init__(self, root: RootFS) -> None:
        super().__init__(root, DeltaTracker(_INDICES, often=1))  # completed changes all the time, the rest rarely
        self._latency_pickers: dict[int, tuple[Picker, Picker]] = {}  # cores -> (device, total) latency pickers
        self._latency_positions: dict[int, array[int]] = {}  # cores -> where both latencies are, for summary_native
        self._kept: dict[int, KeptSummary] = {}  # pid -> the nested dicts summary_careful last wrote for it

    def _latencies(self, n: int) -> tuple[Picker, Picker]:
        pickers = self._latency_pickers.get(n)
        if pickers is None:
            pickers = self._latency_pickers[n] = (
                picker((L.NC_LATENCY_DEVICE,), n),
                picker((L.NC_LATENCY_TOTAL,), n),
            )
        return pickers

    def _positions(self, n: int) -> array[int]:
        positions = self._latency_positions.get(n)
        if positions is None:
            positions = self._latency_positions[n] = latency_positions(n)
        return positions

    def _body(self, app: App) -> dict[str, Any]:
        steps = self._tracker.step(app)
        body = None
        if len(steps) == 1:
            body = summary_native(steps[0], self._positions(steps[0][3]))
        if body is None:
            kept = self._kept.get(app.pid)
            if kept is None:
                kept = self._kept[app.pid] = KeptSummary()
            body = summary_careful(steps, self._latencies, kept)
        period = self._period(steps)
        if period is not None:
            body[B.PERIOD] = period
        return body

    def _forget(self, pid: int) -> None:
        super()._forget(pid)
        self._kept.pop(pid, None)


class KeptSummary:
    """The nested dicts of an application's last body from `summary_careful` (both summaries, ``latency_stats`` and
    its two percentile dicts), into which its next body's values are written: no dict made or freed per
    application and report while they keep their keys (each summary always has its six; a percentile dict is kept
    while the period has samples). Each body's own dict is new, so the assembly never takes it for an unchanged
    body."""

    __slots__ = ("device", "errors", "executions", "latency", "total")

    def __init__(self) -> None:
        self.errors: dict[str, int] | None = None
        self.executions: dict[str, int] | None = None
        self.latency: LatencyStats | None = None
        self.total: dict[str, float] | None = None
        self.device: dict[str, float] | None = None


def _percentiles_into(kept: dict[str, float] | None, samples: list[float]) -> dict[str, float] | None:
    """`percentiles` of ``samples``, written into ``kept`` when there is one (the same keys in the same order)."""
    if not samples or kept is None:
        return percentiles(samples)
    ordered = sorted(samples)
    kept.update(zip(_PERCENTILE_NAMES, _ranks(len(ordered))(ordered), strict=True))
    return kept


def latency_positions(n: int) -> array[int]:
    """Where the latest device latency of each of ``n`` cores is in a reading's flat counters, then the total."""
    return array("I", [core * N + c for c in (L.NC_LATENCY_DEVICE, L.NC_LATENCY_TOTAL) for core in range(n)])


def summary_native(step: DeviceDelta, positions: array[int]) -> dict[str, Any] | None:
    """`summary_careful` of one device by the compiled helper (``positions``: `latency_positions` of the step's
    cores) when every core completed executions, whether or not a rare count changed, for counts and latencies up
    to 2^53. None when the helper is not built, that case does not hold, or the reading is not an ``array("Q")``:
    `summary_careful` then decides."""
    if NATIVE is None:
        return None
    _device, dd, _dt, _n, deltas = step
    body: dict[str, Any] | None = NATIVE.summary(
        deltas, dd.reading.counters, positions, _EXEC_NAMES, _ERR_NAMES, _PERCENTILE_NAMES, _PERCENTILE_VALUES
    )
    return body


def summary_careful(
    steps: list[DeviceDelta], latencies: Callable[[int], tuple[Picker, Picker]], kept: KeptSummary | None = None
) -> dict[str, Any]:
    """``error_summary``, ``execution_summary`` and ``latency_stats`` from the per-device deltas of the mapped
    counters (``latencies(cores)`` gives the pickers of the latest device and total latency of each core).
    ``kept``: the application's `KeptSummary`, whose dicts take this body's values (the body is the same)."""
    totals: list[int] | None = None
    device_lat: list[float] = []
    total_lat: list[float] = []
    for _device, dd, _dt, n, deltas in steps:
        per_counter = list(zip(*[iter(deltas)] * n, strict=True))  # one tuple of n core deltas per counter
        sums = list(map(sum, per_counter))
        if len(sums) < len(_INDICES):  # the rarely changing counts did not change
            sums += _ZEROS[len(sums) :]
        totals = sums if totals is None else list(map(add, totals, sums))
        # the latest latencies of the cores that executed are the samples
        pick_device, pick_total = latencies(n)
        counters = dd.reading.counters
        if all(per_counter[0]):  # every core completed executions (the usual case under load)
            device_lat += [v / 1e6 for v in pick_device(counters) if v]
            total_lat += [v / 1e6 for v in pick_total(counters) if v]
            continue
        executed = list(map(any, zip(*per_counter[:_N_EXEC], strict=True)))  # per core: did it execute?
        if any(executed):
            device_lat += [v / 1e6 for v in compress(pick_device(counters), executed) if v]
            total_lat += [v / 1e6 for v in compress(pick_total(counters), executed) if v]
    if totals is None:
        totals = [0] * len(_INDICES)
    if kept is not None:
        if kept.errors is None or kept.executions is None or kept.latency is None:
            kept.errors = dict(zip(_ERR_NAMES, totals[_N_EXEC:], strict=True))
            kept.executions = dict(zip(_EXEC_NAMES, totals[:_N_EXEC], strict=True))
            kept.latency = LatencyStats(total_latency=None, device_latency=None)
        else:
            kept.errors.update(zip(_ERR_NAMES, totals[_N_EXEC:], strict=True))
            kept.executions.update(zip(_EXEC_NAMES, totals[:_N_EXEC], strict=True))
        kept.total = _percentiles_into(kept.total, total_lat)
        kept.device = _percentiles_into(kept.device, device_lat)
        kept.latency["total_latency"] = kept.total
        kept.latency["device_latency"] = kept.device
        return {B.ERROR_SUMMARY: kept.errors, B.EXECUTION_SUMMARY: kept.executions, B.LATENCY_STATS: kept.latency}
    return {  # ExecutionStatsBody (body.py), as a plain dict: `_body` adds the period to it
        B.ERROR_SUMMARY: dict(zip(_ERR_NAMES, totals[_N_EXEC:], strict=True)),
        B.EXECUTION_SUMMARY: dict(zip(_EXEC_NAMES, totals[:_N_EXEC], strict=True)),
        B.LATENCY_STATS: LatencyStats(
            total_latency=percentiles(total_lat) if total_lat else None,
            device_latency=percentiles(device_lat) if device_lat else None,
        ),
    }


GROUP = ExecutionStats
