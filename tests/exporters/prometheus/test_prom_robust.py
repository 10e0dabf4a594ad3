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
from neuron_monitor.exporters.stream import validate_report
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
    strip = {k: v for k, v in before.items() if not k[0].startswith("neuron_exporter_bad")}
    assert {k: v for k, v in after.items() if k in strip} == strip
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
    for _ in range(4):
        state.apply(trn2_report([runtime(1, "a", [0])], period=2.0))
        clock.now += 2.0
    assert state.interval() == 2.0
    assert state.view().healthy
    clock.now += 3.9  # 5.9 s since the last report < 3 x 2 s
    assert state.view().serving
    clock.now += 0.2
    view = state.view()
    assert not view.serving and not view.healthy and "last report" in view.reason
    series = parse(scrape(state))
    assert not [k for k in series if not k[0].startswith("neuron_exporter")]
    assert one(series, "neuron_exporter_up") == 0
    state.apply(trn2_report([runtime(1, "a", [0])], period=2.0))
    assert state.view().healthy
    state.close_input()
    view = state.view()
    assert view.serving and not view.healthy and view.reason == "stdin closed"
    assert one(parse(scrape(state)), "neuron_exporter_input_closed") == 1
