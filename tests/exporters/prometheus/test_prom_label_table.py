"""Label tuples kept across reports (``context.LabelTable``): the families are the same as with a fresh table,
series that keep their labels keep their tuple objects, and the table stays bounded while labels churn."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from neuron_monitor.exporters.prometheus.context import TABLE_FLOOR, LabelTable
from neuron_monitor.exporters.prometheus.families import Family
from neuron_monitor.exporters.prometheus.snapshot import ShapeOptions, SnapshotBuilder, shape
from neuron_monitor.exporters.prometheus.values import MalformedReport
from neuron_monitor.schema.read import read_report
from tests.exporters.prometheus.prom_reports import runtime, trn2_report


def _k8s(pods: dict[int, str]) -> dict[str, Any]:
    return {
        "neuroncores_k8s_info": {
            str(core): {"pod_name": pod, "namespace": "ns", "container_name": ["c"]} for core, pod in pods.items()
        }
    }


def _stream() -> list[dict[str, Any]]:
    """Reports whose label sets change: runtimes come and go, a tag is reused by a new pid, pods move."""
    reports = []
    for i in range(12):
        tags = [f"job-{d:02d}" for d in range(4)] if i % 4 else ["job-00", f"new-{i}"]
        runtimes = [
            runtime(1000 + d + (100 if i >= 6 else 0), tag, [4 * d + c for c in range(4)], completed=10 + i)
            for d, tag in enumerate(tags)
        ]
        k8s = _k8s({core: f"pod-{(core + i // 3) % 5}" for core in range(8)}) if i % 3 else None
        reports.append(trn2_report(runtimes, report_time=1.7e9 + i, k8s=k8s))
    return reports


def _plain(families: tuple[Family, ...]) -> list[tuple[str, tuple[str, ...], list[tuple[tuple[str, ...], float]]]]:
    return [(f.name, f.labelnames, list(f.samples.items())) for f in families]


def test_kept_tuples_shape_what_a_fresh_table_shapes() -> None:
    for options in (ShapeOptions(), ShapeOptions(core_device_label=False, series_detail="full")):
        builder, fresh = SnapshotBuilder(options), SnapshotBuilder(options)
        for report in _stream():
            kept = builder.ingest(copy.deepcopy(report)).shaped()
            fresh.table = LabelTable()  # a new table for every report: tuples built as before
            alone = fresh.ingest(copy.deepcopy(report)).shaped()
            assert _plain(kept.families) == _plain(alone.families)
            assert kept.series == alone.series


def test_series_that_keep_their_labels_keep_their_tuples() -> None:
    builder = SnapshotBuilder()
    first = builder.ingest(trn2_report(report_time=1.7e9)).shaped()
    second = builder.ingest(trn2_report(report_time=1.7e9 + 1)).shaped()
    before = {f.name: list(f.samples) for f in first.families}
    shared = total = 0
    for fam in second.families:
        for labels in fam.samples:
            total += 1
            shared += any(labels is old for old in before.get(fam.name, ()))
    assert total > 1000 and shared >= 0.9 * total  # the per-runtime and per-core series (not the info ones)


def test_table_stays_bounded_while_labels_churn() -> None:
    table = LabelTable()
    totals: dict[tuple[str, ...], dict[tuple[str, ...], float]] = {}
    most = 0
    for i in range(60):  # every report brings 16 runtimes never seen before
        runtimes = [runtime(1000 + d, f"r{i}-{d}", [4 * d + c for c in range(4)]) for d in range(16)]
        fams = shape(read_report(trn2_report(runtimes, report_time=1.7e9 + i)), totals, ShapeOptions(), table=table)
        most = max(most, table.size)
        assert table.used == fams.series_count()
    assert most <= max(2 * table.used, TABLE_FLOOR) + 2 * table.used


def test_table_keeps_no_label_value_over_the_cap() -> None:
    builder = SnapshotBuilder(ShapeOptions(max_label_length=16))
    long_tag = "x" * 5000
    runtimes = [runtime(1000, long_tag, [0, 1]), runtime(1001, "short", [4])]
    shaped = builder.ingest(trn2_report(runtimes)).shaped()
    assert all(len(v) <= 16 for f in shaped.families for labels in f.samples for v in labels)
    held = [v for heads in builder.table.heads.values() for labels in heads.values() for v in labels]
    held += [v for (base, _), _heads in builder.table.heads.items() for v in base]
    held += [v for base in builder.table.plans for v in base]
    assert held and max(map(len, held)) <= 16


def _held(table: LabelTable) -> list[str]:
    held = [v for heads in table.heads.values() for labels in heads.values() for v in labels]
    held += [v for (base, _), _heads in table.heads.items() for v in base]
    held += [v for base in table.plans for v in base]
    return held


@pytest.mark.parametrize("stepped", [False, True])
def test_a_malformed_report_leaves_no_label_value_over_the_cap(stepped: bool) -> None:
    """A report whose label values are over the cap and whose gauges are found malformed while it is shaped
    (after some of its series were filed) is rejected without leaving those values in the table: else each such
    report added its long values until the table grew past its bound (hundreds of reports' worth)."""
    builder = SnapshotBuilder(ShapeOptions(max_label_length=16))
    builder.ingest(trn2_report([runtime(1000, "short", [0, 1])])).shaped()
    bad = trn2_report([runtime(1000, "x" * 5000, [0, 1])])
    bad["neuron_runtime_data"][0]["report"]["neuron_runtime_vcpu_usage"]["vcpu_usage"]["user"] = "99%"
    snapshot = builder.ingest(bad)
    with pytest.raises(MalformedReport):
        if stepped:
            for _ in snapshot.shaping_steps():
                pass
        else:
            snapshot.shaped()
    held = _held(builder.table)
    assert not held or max(map(len, held)) <= 16


def test_a_shaping_left_unfinished_leaves_no_label_value_over_the_cap() -> None:
    """A shaping in steps that stops part way (the publisher let it go) keeps no label value over the cap."""
    builder = SnapshotBuilder(ShapeOptions(max_label_length=16))
    runtimes = [runtime(1000 + i, "x" * 5000 + str(i), [i]) for i in range(4)]
    steps = builder.ingest(trn2_report(runtimes)).shaping_steps()
    for _ in range(3):
        next(steps)
    steps.close()
    held = _held(builder.table)
    assert not held or max(map(len, held)) <= 16


def test_a_shaping_in_steps_overtaken_by_a_whole_shaping_leaves_no_label_value_over_the_cap() -> None:
    """While a report is shaped in steps, ``shaped`` shapes it whole (and caps it); the steps then finish with the
    uncapped values, which are not kept (the report's families are the capped ones)."""
    builder = SnapshotBuilder(ShapeOptions(max_label_length=16))
    runtimes = [runtime(1000 + i, "x" * 5000 + str(i), [i]) for i in range(4)]
    snapshot = builder.ingest(trn2_report(runtimes))
    steps = snapshot.shaping_steps()
    next(steps)
    shaped = snapshot.shaped()
    for _ in steps:
        pass
    assert snapshot.shaped() is shaped
    held = _held(builder.table)
    assert not held or max(map(len, held)) <= 16
