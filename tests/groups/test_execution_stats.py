"""execution_stats: nearest-rank percentiles, null latency when nothing ran, counter mapping; the fast summary
against its careful twin."""

from __future__ import annotations

from array import array

import orjson
from hypothesis import event, given, settings
from hypothesis import strategies as st

from neuron_monitor.groups.execution_stats.collector import _INDICES as INDICES
from neuron_monitor.groups.execution_stats.collector import (
    ExecutionStats,
    latency_positions,
    percentiles,
    summary_careful,
    summary_native,
)
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.native import NATIVE
from neuron_monitor.neuron.deltas import DeviceDelta
from tests.neuron.appdata import app_with, counters


def test_percentiles_nearest_rank_in_aws_key_order() -> None:
    p = percentiles([float(i) for i in range(1, 101)])
    assert p is not None
    assert list(p) == ["p0", "p1", "p100", "p25", "p50", "p75", "p99"]
    assert (p["p0"], p["p1"], p["p25"], p["p50"], p["p75"], p["p99"], p["p100"]) == (1, 1, 25, 50, 75, 99, 100)
    assert percentiles([]) is None
    assert percentiles([0.5]) == dict.fromkeys(p, 0.5)


def test_deltas_and_latency() -> None:
    g = ExecutionStats(RootFS("/"))
    first = app_with({0: counters({1: 10, 8: 1}), 1: counters({1: 5})}, t=0.0)
    body = g.collect([first], [])[first.pid]
    assert body["execution_summary"]["completed"] == 0  # the birth baseline: nothing new yet
    assert body["latency_stats"] == {"total_latency": None, "device_latency": None}
    later = app_with({0: counters({1: 25, 8: 4, 3: 3, 13: 1500, 14: 1700}), 1: counters({1: 5, 13: 900})},
                     t=2.0, like=first)  # fmt: skip
    body = g.collect([later], [])[later.pid]
    assert body["execution_summary"] == {"completed": 15, "completed_with_err": 0, "completed_with_num_err": 3,
                                         "timed_out": 0, "incorrect_input": 0, "failed_to_queue": 0}  # fmt: skip
    assert body["error_summary"]["numerical"] == 3
    assert body["latency_stats"]["device_latency"]["p50"] == 0.0015  # core 1 did not execute: not sampled
    assert body["latency_stats"]["total_latency"]["p100"] == 0.0017
    assert body["period"] == 2.0


@st.composite
def _device_step(draw: st.DrawFn) -> DeviceDelta:
    """One device's deltas as the group's tracker gives them: the frequent ``completed`` per core, then (when one
    of them changed) the rare counts; latencies in the reading, zeros included."""
    n = draw(st.integers(1, 16))
    usual = draw(st.booleans())  # half the cases in the fast summary's domain: every core completed, nothing rare
    completed = draw(st.lists(st.integers(1 if usual else 0, 10**9), min_size=n, max_size=n))
    rare = (
        []
        if usual
        else draw(st.lists(st.integers(0, 10**6), min_size=n * (len(INDICES) - 1), max_size=n * (len(INDICES) - 1)))
    )
    if not usual and draw(st.booleans()):
        rare = []
    lat = {c: counters({13: draw(st.integers(0, 10**7)), 14: draw(st.integers(0, 10**7))}) for c in range(n)}
    app = app_with(lat, t=1.0)
    return (0, app.data.devices[0], draw(st.sampled_from([0.0, 0.1, 2.5])), n, completed + rare)


@settings(max_examples=400, deadline=None)
@given(_device_step())
def test_the_native_summary_gives_what_its_careful_twin_does(step: DeviceDelta) -> None:
    g = ExecutionStats(RootFS("/"))
    reading = step[1].reading
    reading.counters = array("Q", reading.counters)  # as the block parser reads them (the helper takes only these)
    native = summary_native(step, latency_positions(step[3]))
    if native is not None:  # the compiled helper (tests/test_native.py checks it is built where it can be)
        event("native summary answered" + (" (rare counts changed)" if len(step[4]) > step[3] else ""))
        assert repr(native) == repr(summary_careful([step], g._latencies))
        assert orjson.dumps(native) == orjson.dumps(summary_careful([step], g._latencies))
    elif NATIVE is not None and all(step[4][: step[3]]):
        raise AssertionError("every core completed executions: the helper answers, rare counts changed or not")


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 16), st.data())
def test_the_native_summary_around_its_limits(n: int, data: st.DataObject) -> None:
    """Counts and latencies around 2^53, duplicates and zeros; positions of another core count."""
    g = ExecutionStats(RootFS("/"))
    value = st.one_of(st.integers(1, 10**7), st.integers(2**53 - 2, 2**53 + 2), st.sampled_from([1, 7, 2**53]))
    completed = data.draw(st.lists(value, min_size=n, max_size=n))
    lat = st.one_of(st.just(0), value)
    app = app_with({c: counters({13: data.draw(lat), 14: data.draw(lat)}) for c in range(n)}, t=1.0)
    app.data.devices[0].reading.counters = array("Q", app.data.devices[0].reading.counters)
    step: DeviceDelta = (0, app.data.devices[0], 0.1, n, completed)
    native = summary_native(step, latency_positions(n))
    if native is not None:
        event("native summary answered")
        assert repr(native) == repr(summary_careful([step], g._latencies))
    assert summary_native(step, latency_positions(n + 1)) is None
    rare = [data.draw(st.integers(0, 10**6)) for _ in range(n * (len(INDICES) - 1))]
    assert summary_native((0, step[1], 0.1, n, [*completed, *rare[:-1]]), latency_positions(n)) is None  # torn rows
