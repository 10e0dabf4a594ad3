"""Bad input never crashes or half-applies; the fast encoder writes client_python's bytes; staleness and health."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from neuron_monitor.exporters.prometheus.collector import ExporterCollector
from neuron_monitor.exporters.prometheus.state import ExporterState
from neuron_monitor.schema.stream import validate_report
from tests.exporters.prometheus.prom_helpers import feed, one, parse, scrape
from tests.exporters.prometheus.prom_reports import CWAGENT_REPORT, runtime, trn2_report


def _small() -> dict[str, Any]:
    return trn2_report([runtime(1, "a", [0, 1], completed=5)], vcpus=4, devices=2)


def test_wrong_counter_type_rejects_the_report_at_once() -> None:
    state = feed([_small()])
    bad = _small()
    bad["neuron_runtime_data"][0]["report"]["execution_stats"]["execution_summary"]["completed"] = "5"
    assert not state.apply(bad)
    state.apply(_small())
    series = parse(scrape(state))
    assert one(series, "execution_status_total", runtime_tag="a", status_type="completed") == 10  # not 15
    assert one(series, "neuron_exporter_bad_lines_total", reason="malformed_report") == 1


def test_wrong_gauge_type_keeps_serving_the_last_whole_report() -> None:
    state = feed([_small()])
    before = parse(scrape(state))
    bad = _small()
    bad["neuron_runtime_data"][0]["report"]["execution_stats"]["execution_summary"]["completed"] = 50
    bad["neuron_runtime_data"][0]["report"]["memory_used"]["neuron_runtime_used_bytes"]["host"] = 123
    bad["neuron_runtime_data"][0]["report"]["neuroncore_counters"]["neuroncores_in_use"]["1"] = {
        "neuroncore_utilization": "99%"
    }
    state.apply(bad)  # counted (its counts are well typed); its gauges are found malformed when first served
    after = parse(scrape(state))
    assert one(after, "neuron_exporter_bad_lines_total", reason="malformed_report") == 1
    # the previous report is served whole: nothing of the bad one leaks in, neither gauges nor counters
    # (neuron_exporter_reports_total counts it: its well-typed counts were counted)
    strip = {k: v for k, v in before.items() if not k[0].startswith(("neuron_exporter_bad", "neuron_exporter_reports"))}
    assert {k: v for k, v in after.items() if k in strip} == strip
    assert one(after, "neuron_exporter_reports_total") == one(before, "neuron_exporter_reports_total") + 1
    assert one(after, "neuron_runtime_memory_used_bytes", runtime_tag="a", memory_location="host") != 123
    state.apply(_small())
    after = parse(scrape(state))  # the bad report's valid counts are not lost
    assert one(after, "execution_status_total", runtime_tag="a", status_type="completed") == 60


def test_unknown_groups_and_keys_are_ignored() -> None:
    report = _small()
    report["system_data"]["gpu_thermals"] = {"period": 1.0, "celsius": [1, 2], "error": ""}
    report["neuron_runtime_data"][0]["report"]["future_group"] = {"x": {"y": 1}}
    report["something_new"] = {"a": 1}
    state = ExporterState()
    assert state.apply(report)
    assert one(parse(scrape(state)), "execution_status_total", runtime_tag="a", status_type="completed") == 5


def test_nulls_and_missing_parts_are_fine() -> None:
    report = {"neuron_runtime_data": None, "system_data": None, "instance_info": None, "neuron_hardware_info": None}
    state = ExporterState()
    assert state.apply(report)
    series = parse(scrape(state))
    assert one(series, "neuron_exporter_series") == 0


def _leaves(obj: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in _leaves(v, (*path, k))] + [path]
    if isinstance(obj, list):
        return [p for i, v in enumerate(obj) for p in _leaves(v, (*path, i))] + [path]
    return [path]


_REPORT = orjson.loads(CWAGENT_REPORT.read_bytes())
_PATHS = [p for p in _leaves(_REPORT) if p]
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=5,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(_PATHS), _json), min_size=1, max_size=4))
def test_mutated_real_reports_never_crash_or_emit_bad_exposition(mutations: list[tuple[tuple, Any]]) -> None:
    report = copy.deepcopy(_REPORT)
    for path, value in mutations:
        target = report
        try:
            for step in path[:-1]:
                target = target[step]
            target[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    state = feed([_REPORT])
    if validate_report(report):
        return  # the stream would have skipped this line
    state.apply(report)  # accepted or rejected, never raises
    for openmetrics in (False, True):
        body = ExporterCollector(state).scrape([], openmetrics).decode()
        if not openmetrics:
            parse(body)  # well-formed, no duplicate series


def test_fast_encoder_writes_client_pythons_bytes() -> None:
    report = trn2_report(
        [runtime(1, 'we"ird\\tag\nx', [0, 1]), runtime(2, "ok", [4])],
        k8s={"neuroncores_k8s_info": {"0": {"pod_name": "p", "namespace": "n", "container_name": ["c"]}}},
    )
    report["instance_info"]["instance_name"] = 'name with "quotes" and \\ and ünïcode'
    state = feed([report])
    collector = ExporterCollector(state)
    assert collector.scrape([], False) == generate_latest(collector)  # type: ignore[arg-type]
    assert collector.scrape([], True) == generate_openmetrics(collector)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_stale_data_is_withdrawn_and_health_follows() -> None:
    clock = _Clock()
    state = ExporterState(stale_periods=3, clock=clock)
    view = state.view()
    assert (view.healthy, view.serving, view.reason) == (False, False, "no report received yet")
    for i in range(4):  # reports written every 5 s (report_time), groups collected every 5 s
        state.apply(trn2_report([runtime(1, "a", [0], period=5.0)], period=5.0, report_time=1.7e9 + 5 * i))
        clock.now += 5.0
    assert state.interval() == 5.0
    assert state.window() == 15.0  # 3 x 5 s, above the 10 s floor and 2 x the longest period
    assert state.view().healthy
    clock.now += 9.9  # 14.9 s since the last report
    assert state.view().serving
    clock.now += 0.2
    view = state.view()
    assert not view.serving and not view.healthy and "last report" in view.reason
    series = parse(scrape(state))
    assert not [k for k in series if not k[0].startswith("neuron_exporter")]
    assert one(series, "neuron_exporter_up") == 0
    assert one(series, "neuron_exporter_stale_after_seconds") == 15.0
    state.apply(trn2_report([runtime(1, "a", [0], period=5.0)], period=5.0, report_time=1.7e9 + 100))
    assert state.view().healthy
    state.close_input()
    view = state.view()
    assert view.serving and not view.healthy and view.reason == "stdin closed"
    assert one(parse(scrape(state)), "neuron_exporter_input_closed") == 1


def test_staleness_comes_from_the_reports_not_from_arrival_bursts() -> None:
    """Five reports written 1 s apart but replayed in a burst, then a pause: served until the 10 s floor."""
    clock = _Clock()
    state = ExporterState(clock=clock)
    for i in range(5):
        state.apply(trn2_report([runtime(1, "a", [0])], report_time=1.7e9 + i))
        clock.now += 0.01
    assert state.interval() == 1.0
    assert state.window() == 10.0
    clock.now += 9.5
    assert state.view().serving
    clock.now += 1.0
    assert not state.view().serving


def test_staleness_window_is_at_least_twice_the_longest_group_period() -> None:
    clock = _Clock()
    state = ExporterState(clock=clock, stale_floor=1.0)
    report = trn2_report([runtime(1, "a", [0], period=1.0)], period=1.0)
    report["system_data"]["memory_info"]["period"] = 30.0  # one slow group
    for i in range(3):
        report["report_time"] = 1.7e9 + i
        state.apply(report)
    assert state.interval() == 1.0
    assert state.window() == 60.0
    clock.now += 59.0
    assert state.view().serving
    floor = ExporterState(clock=clock, stale_periods=1.0, stale_floor=25.0)
    floor.apply(trn2_report([runtime(1, "a", [0])]))
    assert floor.window() == 25.0


def test_reports_without_report_time_use_the_shortest_period() -> None:
    state = ExporterState()
    report = trn2_report([runtime(1, "a", [0], period=5.0)], period=5.0)
    del report["report_time"]
    state.apply(report)
    assert state.interval() == 5.0
    assert state.window() == 15.0
