"""The read layer: real AWS reports and simulated trn2/trn3 reports read without a problem; hostile input never
raises; wrong types become problems of the right kind."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_monitor.groups.execution_stats.spec import ExecutionStats
from neuron_monitor.groups.neuroncore_counters.spec import NeuroncoreCounters
from neuron_monitor.groups.registry import RUNTIME_GROUPS, SYSTEM_GROUPS
from neuron_monitor.schema import names as N
from neuron_monitor.schema.read import Report, read_report
from neuron_monitor.schema.spec import registry
from tests.schema.conftest import aws_reports, simulated_report


def _read_everything(report: Report) -> list[str]:
    """Read every group and run every consumer function of its spec; return every problem found."""
    problems = [*report.problems.counts, *report.problems.values]
    groups = [*report.system.values(), *(g for rt in report.runtimes for g in rt.groups.values())]
    for group in groups:
        data, found = group.read()
        problems += [*found.counts, *found.values]
        spec = group.spec
        list(spec.gauges(data))
        if spec.counts is not None:
            list(spec.counts(data, group.period or 0.0))
        list(spec.datums(data, group.period or 0.0, True))
    return problems


def test_every_daemon_group_has_a_spec_and_nothing_else_does() -> None:
    reg = registry()
    assert sorted(reg.system) == sorted(SYSTEM_GROUPS)
    assert sorted(reg.runtime) == sorted(RUNTIME_GROUPS)


def test_family_and_metric_names_are_unique_across_specs() -> None:
    fams = [f.name for spec in registry().all() for f in spec.prometheus]
    assert len(fams) == len(set(fams))
    for spec in registry().all():
        assert spec.doc, spec.name
        assert spec.tracks, spec.name


def test_aws_reports_read_without_a_problem() -> None:
    reports = aws_reports()
    assert len(reports) >= 4
    for raw in reports:
        report = read_report(raw)
        assert report.runtimes and report.system
        assert _read_everything(report) == []


@pytest.mark.parametrize(("shape", "key"), [("trn2.48xlarge", "v3d"), ("trn3.48xlarge", "v4d")])
def test_simulated_reports_read_with_their_physical_breakdown(shape: str, key: str) -> None:
    raw = simulated_report(shape)
    report = read_report(raw)
    assert _read_everything(report) == []
    assert set(report.system) == set(SYSTEM_GROUPS)
    cores = 0
    for rt in report.runtimes:
        counters = rt.groups[N.NEURONCORE_COUNTERS].data_as(NeuroncoreCounters)
        assert counters is not None
        for core in counters.cores:
            written = raw_core(raw, rt.where, core)
            assert key in written
            physical = counters.physical()[core]
            assert physical == {n: v["neuroncore_utilization"] for n, v in written[key].items()}
            assert len(physical) == 2
            cores += 1
    assert cores > 0


def raw_core(raw: dict[str, Any], where: str, core: str) -> dict[str, Any]:
    i = int(where.split("[")[1].rstrip("]"))
    entry = raw["neuron_runtime_data"][i]["report"]["neuroncore_counters"]["neuroncores_in_use"][core]
    assert isinstance(entry, dict)
    return entry


def test_a_future_breakdown_key_is_read_too() -> None:
    raw = copy.deepcopy(aws_reports()[0])
    cores = raw["neuron_runtime_data"][0]["report"]["neuroncore_counters"]["neuroncores_in_use"]
    first = next(iter(cores))
    cores[first]["v9d"] = {"nc_v9.0": {"neuroncore_utilization": 40.0}, "nc_v9.1": {"neuroncore_utilization": 60}}
    counters = read_report(raw).runtimes[0].groups[N.NEURONCORE_COUNTERS].data_as(NeuroncoreCounters)
    assert counters is not None
    assert counters.physical()[first] == {"nc_v9.0": 40.0, "nc_v9.1": 60.0}


def test_wrong_types_are_problems_of_the_right_kind() -> None:
    raw = copy.deepcopy(aws_reports()[0])
    groups = raw["neuron_runtime_data"][0]["report"]
    groups["execution_stats"]["execution_summary"]["completed"] = "5"  # a count
    groups["execution_stats"]["latency_stats"]["total_latency"] = {"p50": [1]}  # a value
    report = read_report(raw)
    assert report.problems.counts == [] and report.problems.values == []
    data, problems = report.runtimes[0].groups[N.EXECUTION_STATS].read()
    assert isinstance(data, ExecutionStats)
    assert "total_latency" not in data.latency()  # read on first use, adding its problem then
    assert problems.counts == [
        "neuron_runtime_data[0].report.execution_stats.execution_summary.completed: expected a number, got str"
    ]
    assert problems.values == [
        "neuron_runtime_data[0].report.execution_stats.latency_stats.total_latency.p50: expected a number, got list"
    ]
    assert data.execution_summary is not None and "completed" not in data.execution_summary


def test_envelope_problems_are_count_problems_and_skip_the_part() -> None:
    raw = copy.deepcopy(aws_reports()[0])
    raw["neuron_runtime_data"][0]["report"]["memory_used"] = [1, 2]
    raw["neuron_runtime_data"][0]["report"]["execution_stats"]["period"] = "soon"
    raw["system_data"]["vcpu_usage"]["error"] = {"no": 1}
    report = read_report(raw)
    assert N.MEMORY_USED not in report.runtimes[0].groups
    assert report.runtimes[0].groups[N.EXECUTION_STATS].period is None
    assert len(report.problems.counts) == 3


def test_unknown_groups_are_skipped_unread() -> None:
    raw = copy.deepcopy(aws_reports()[0])
    raw["system_data"]["gpu_thermals"] = "not even an object"
    raw["neuron_runtime_data"][0]["report"]["future_group"] = {"x": 1}
    report = read_report(raw)
    assert "gpu_thermals" not in report.system and not report.problems


def _leaves(obj: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in _leaves(v, (*path, k))] + [path]
    if isinstance(obj, list):
        return [p for i, v in enumerate(obj) for p in _leaves(v, (*path, i))] + [path]
    return [path]


_BASE = aws_reports()[-1]
_PATHS = [p for p in _leaves(_BASE) if p]
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=5,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(_PATHS), _json), min_size=1, max_size=4))
def test_hostile_reports_never_raise(mutations: list[tuple[tuple[Any, ...], Any]]) -> None:
    raw = copy.deepcopy(_BASE)
    for path, value in mutations:
        target: Any = raw
        try:
            for step in path[:-1]:
                target = target[step]
            target[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    _read_everything(read_report(raw))
