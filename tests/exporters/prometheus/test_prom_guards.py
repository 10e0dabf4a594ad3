"""Counters that never lie, label values that cannot amplify, and ``_created`` samples on request."""

from __future__ import annotations

import math
from typing import Any

from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

from neuron_monitor.exporters.prometheus.labelcap import TRUNCATION_MARKER, cap_strings, truncate
from neuron_monitor.exporters.prometheus.state import ExporterState
from tests.exporters.prometheus.prom_helpers import one, parse, scrape, select
from tests.exporters.prometheus.prom_reports import runtime, trn2_report


def _report(i: int, **kw: Any) -> dict[str, Any]:
    return trn2_report([runtime(1, "a", [0, 1], completed=5)], report_time=1.7e9 + i, **kw)


def _counters(text: str) -> dict[Any, float]:
    return {k: v for k, v in parse(text).items() if k[0].endswith("_total") and not k[0].startswith("neuron_exp")}


def test_impossible_counts_are_dropped_and_counted() -> None:
    state = ExporterState()
    state.apply(_report(0))
    before = _counters(scrape(state))
    bad = _report(1)
    rt = bad["neuron_runtime_data"][0]["report"]
    rt["execution_stats"]["execution_summary"]["completed"] = -15  # negative
    rt["execution_stats"]["error_summary"]["generic"] = 1.7e308  # absurd; twice would overflow to +Inf
    rt["neuroncore_counters"]["neuroncores_in_use"]["0"]["flops"] = math.inf  # non-finite (not from orjson)
    bad["system_data"]["neuron_hw_counters"]["neuron_devices"][0]["mem_ecc_corrected"] = -3
    bad["system_data"]["vcpu_usage"]["average_usage"]["user"] = -400.0
    bad["system_data"]["vcpu_usage"]["context_switch_count"] = math.nan
    assert state.apply(bad) and state.apply(bad)
    text = scrape(state)
    after = _counters(text)
    for key, value in after.items():
        assert math.isfinite(value) and value >= before.get(key, 0.0), key
    series = parse(text)
    assert one(series, "execution_status_total", runtime_tag="a", status_type="completed") == 5
    assert one(series, "execution_errors_total", runtime_tag="a", error_type="generic") == 1
    bad_input = {dict(k)["reason"]: v for k, v in select(series, "neuron_exporter_bad_input_total").items()}
    assert bad_input == {"negative": 6.0, "absurd": 2.0, "non_finite": 4.0, "label_too_long": 0.0}
    for openmetrics_family in parse_openmetrics(scrape(state, openmetrics=True)):  # client_python's strict parser
        for sample in openmetrics_family.samples:
            assert math.isfinite(sample.value)


def test_a_served_counter_never_decreases_over_a_hostile_stream() -> None:
    state = ExporterState()
    seen: dict[Any, float] = {}
    values = [3, -5, 0, 1e300, 7, float("inf"), -0.5, 2]
    for i, value in enumerate(values):
        report = _report(i)
        report["neuron_runtime_data"][0]["report"]["execution_stats"]["execution_summary"]["completed"] = value
        report["system_data"]["neuron_hw_counters"]["neuron_devices"][1]["sram_ecc_uncorrected"] = value
        state.apply(report)
        for key, total in _counters(scrape(state)).items():
            assert math.isfinite(total) and total >= seen.get(key, 0.0), (key, value)
            seen[key] = total
    assert one(parse(scrape(state)), "execution_status_total", runtime_tag="a", status_type="completed") == 12


def test_long_label_values_are_cut_with_a_marker_everywhere() -> None:
    state = ExporterState()
    report = _report(0)
    report["instance_info"]["instance_name"] = "n" * 100_000
    report["neuron_runtime_data"][0]["neuron_runtime_tag"] = "t" * 50_000
    summary = report["neuron_runtime_data"][0]["report"]["execution_stats"]["error_summary"]
    summary["x" * 70_000] = 4  # an object key that becomes a label value (error_type)
    state.apply(report)
    text = scrape(state)
    assert len(text) < 2_000_000
    series = parse(text)
    for _name, labels in series:
        for _, value in labels:
            assert len(value) <= 1024
    capped_tag = truncate("t" * 50_000, 1024)
    assert capped_tag.endswith(TRUNCATION_MARKER) and len(capped_tag) == 1024
    assert one(series, "execution_errors_total", runtime_tag=capped_tag, error_type=truncate("x" * 70_000, 1024)) == 4
    assert one(series, "execution_status_total", runtime_tag=capped_tag, status_type="completed") == 5
    assert one(series, "neuron_exporter_bad_input_total", reason="label_too_long") == 3


def test_cap_strings_leaves_short_strings_alone() -> None:
    report = _report(0)
    import copy

    original = copy.deepcopy(report)
    assert cap_strings(report, 1024) == 0
    assert report == original
    nested = {"a": [{"k" * 20: ["v" * 30, 1, None]}]}
    assert cap_strings(nested, 16) == 2
    (key,) = nested["a"][0]
    assert len(key) == 16 and nested["a"][0][key][0] == truncate("v" * 30, 16)


def test_created_series_on_request() -> None:
    wall = [1.8e9]
    state = ExporterState(created_series=True, wall_clock=lambda: wall[0])
    state.apply(_report(0))
    series = parse(scrape(state))
    created = select(series, "execution_errors_created", runtime_tag="a")
    assert created and set(created.values()) == {1.8e9}
    assert select(series, "execution_status_created") and select(series, "hardware_ecc_events_created")
    wall[0] += 10
    state.apply(_report(1))
    assert set(select(parse(scrape(state)), "execution_status_created").values()) == {1.8e9}  # kept
    restarted = trn2_report([runtime(9, "a", [0, 1], completed=1)], report_time=1.7e9 + 2)
    restarted["neuron_runtime_data"][0]["report"]["execution_stats"]["execution_summary"]["completed"] = 1
    state.apply(trn2_report([], report_time=1.7e9 + 2))  # the runtime exits: its series vanish
    wall[0] += 10
    assert not select(parse(scrape(state)), "execution_status_created", runtime_tag="a")
    state.apply(restarted)
    assert set(select(parse(scrape(state)), "execution_status_created", runtime_tag="a").values()) == {1.8e9 + 20}
    om = scrape(state, openmetrics=True)
    names = {s.name for fam in parse_openmetrics(om) for s in fam.samples}
    assert {"execution_status_created", "execution_errors_created", "hardware_ecc_events_created"} <= names
    plain = ExporterState()
    plain.apply(_report(0))
    assert "_created" not in scrape(plain)
