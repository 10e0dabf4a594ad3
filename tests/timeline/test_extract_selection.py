"""Report extraction (real and synthetic reports, malformed input) and the processing-time filter parsers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_monitor.timeline.extract import GroupPart, Runtime, Snapshot, parse_snapshot
from neuron_monitor.timeline.selection import (
    ALL_TYPES,
    ERROR_TYPES,
    Selection,
    format_cores,
    parse_core_list,
    parse_event_types,
)

from .factory import T0, Rt, report

REPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "reports"  # the real reference reports


def real_reports() -> list[dict[str, Any]]:
    out = []
    for name in ("wandb_trn1-2xl_reports.jsonl", "cwagent-test_trn1n32xl_report_line.json"):
        out += [json.loads(line) for line in (REPORTS / name).read_text().splitlines() if line.strip()]
    return out


def test_real_trn1n_report_maps_model_cores_to_global_indices() -> None:
    rep = real_reports()[-1]  # trn1n.32xlarge, 2 runtimes, subgraphs as (local NC, device)
    snap = parse_snapshot(rep, 100.0, "x")
    assert snap.instance == "i-09db9b55e0095612f" and snap.instance_type == "trn1n.32xlarge"
    assert [rt.tag for rt in snap.runtimes] == ["367", "123"]  # same pid, two tags: both kept
    rt = snap.runtimes[0]
    subgraphs = [
        (sg["neuron_device_index"], sg["neuroncore_index"])
        for m in rep["neuron_runtime_data"][0]["report"]["memory_used"]["loaded_models"]
        for sg in m["subgraphs"].values()
    ]
    assert rt.cores == tuple(sorted({d * 2 + c for d, c in subgraphs}))
    assert rt.facts.utilization is not None and rt.facts.utilization[6] == pytest.approx(41.4)
    assert _errors(rt) == {"generic_error": 2}
    assert not [s for s in _runtime_part(rt, "execution_stats").samples if s[0].category == "latency"]  # null
    ecc = {f[1]: f[3] for f in _system(snap, "neuron_hw_counters").findings()}
    assert ecc[("14",)] == {"mem_ecc_uncorrected": 1, "sram_ecc_uncorrected": 1}


def _runtime_part(rt: Runtime, name: str) -> GroupPart:
    return next(part for part in rt.groups if part.spec.name == name)


def _errors(rt: Runtime) -> dict[str, float]:
    """The runtime's det findings of the period, by problem type."""
    return {f[0].kind: f[2] for part in rt.groups for f in part.findings()}


def _system(snap: Snapshot, name: str) -> GroupPart:
    return next(part for part in snap.system if part.spec.name == name)


def _has_system(snap: Snapshot, name: str) -> bool:
    return any(part.spec.name == name for part in snap.system)


def test_real_trn1_reports_parse() -> None:
    snaps = [parse_snapshot(r, float(i), "x") for i, r in enumerate(real_reports()[:3])]
    assert [rt.pid for s in snaps for rt in s.runtimes] == [1337, 16851, 16851]
    rt = snaps[0].runtimes[0]
    assert rt.facts.executions == 260 and rt.facts.utilization_period is not None
    executions, latency = (s[2] for s in _runtime_part(rt, "execution_stats").samples)
    assert executions["completed"] == 260 and latency["p50"] == pytest.approx(9.5367431640625e-02)
    assert snaps[0].runtimes[0].models == 2 and _system(snaps[0], "memory_info").samples


def test_carried_over_counters_are_not_seen_twice() -> None:
    rep = report(T0, [Rt(1, "a", [0], errors={"numerical": 3}, fresh=False)], system_fresh=False, ecc={0: (1, 0)})
    snap = parse_snapshot(rep, T0, "x")
    rt = snap.runtimes[0]
    assert rt.facts.executions is None and rt.facts.utilization_period is None
    assert not any(part.fresh or part.findings() for part in rt.groups)
    assert rt.facts.utilization == {0: 50.0}  # the latest value is still known (gauges)
    assert _system(snap, "neuron_hw_counters").findings() == [] and not _system(snap, "vcpu_usage").fresh


def test_error_types_do_not_double_count_execution_outcomes() -> None:
    rep = report(
        T0,
        [Rt(1, "a", [0], errors={"numerical": 2, "hardware": 1},
            outcomes={"completed_with_num_err": 2, "completed_with_err": 4, "failed_to_queue": 5})],
    )  # fmt: skip
    rt = parse_snapshot(rep, T0, "x").runtimes[0]
    assert _errors(rt) == {"numerical_error": 2, "hardware_error": 1, "failed_to_queue": 5, "execution_error": 3}


def test_group_errors_and_missing_parts_leave_fields_empty() -> None:
    rep = report(T0, [Rt(1, "a", [0, 1])])
    rep["neuron_runtime_data"][0]["report"]["neuroncore_counters"]["error"] = "boom"
    del rep["system_data"]["vcpu_usage"]
    rep["neuron_runtime_data"].append({"pid": "not a number"})
    snap = parse_snapshot(rep, T0, "rec.gz")
    assert snap.runtimes[0].facts.utilization is None and not _has_system(snap, "vcpu_usage")
    assert "neuroncore_counters" not in [part.spec.name for part in snap.runtimes[0].groups]
    assert snap.problems == ["a runtime entry without a numeric pid"]
    assert parse_snapshot({"neuron_runtime_data": []}, T0, "rec.gz").instance == "rec.gz"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(path_choice=st.integers(min_value=0, max_value=10_000), value=json_values)
def test_any_malformed_value_is_tolerated(path_choice: int, value: Any) -> None:
    """Replace any one node of a full report with any JSON value: parsing never raises."""
    rep = report(T0, [Rt(1, "a", [0, 1], errors={"numerical": 1}), Rt(2, "b", [2])], ecc={1: (1, 1)})
    nodes: list[tuple[Any, Any]] = []

    def walk(obj: Any) -> None:
        items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else []
        for k, v in items:
            nodes.append((obj, k))
            walk(v)

    walk(rep)
    parent, key = nodes[path_choice % len(nodes)]
    parent[key] = value
    parse_snapshot(rep, T0, "x")


def test_core_lists() -> None:
    assert parse_core_list("0,2-5") == {0, 2, 3, 4, 5}
    assert parse_core_list(" 7 ") == {7}
    assert format_cores([5, 0, 2, 3, 4]) == "0,2-5"
    for bad in ("", "a", "3-1", "-1", "1-", "1,,x"):
        with pytest.raises(ValueError):
            parse_core_list(bad)


def test_event_types() -> None:
    assert parse_event_types("latency,flops") == {"latency", "flops"}
    assert parse_event_types("errors,^transient_error") == set(ERROR_TYPES) - {"transient_error"}
    assert parse_event_types("^flops") == set(ALL_TYPES) - {"flops"}
    with pytest.raises(ValueError, match="unknown event type 'nope'"):
        parse_event_types("nope")
    sel = Selection.from_options(None, "counters", "i-1,i-2", ignore_host=True)
    assert sel.wants_type("latency") and not sel.wants_type("host_vcpu") and not sel.wants_type("numerical_error")
    assert sel.wants_instance("i-2") and not sel.wants_instance("i-3")
    assert Selection(cores=frozenset({3})).wants_any_core((2, 3)) and not Selection(
        cores=frozenset({3})
    ).wants_any_core((1,))
