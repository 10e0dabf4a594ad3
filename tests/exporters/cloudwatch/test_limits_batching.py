"""API limits checked by our code, and request packing: <= 1000 datums, <= 1 MB, <= 150 values, nothing lost."""

from __future__ import annotations

import json
import math
import time
from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_monitor.exporters.cloudwatch.batching import pack, pack_all
from neuron_monitor.exporters.cloudwatch.buffer import DatumBuffer
from neuron_monitor.exporters.cloudwatch.datum import Datum
from neuron_monitor.exporters.cloudwatch.limits import (
    MAX_AGE_SECONDS,
    DatumFilter,
    check_datum,
    check_namespace,
)
from neuron_monitor.exporters.cloudwatch.mapping import ReportMapper
from tests.exporters.cloudwatch.conftest import report_sequence

NOW = 1_800_000_000.0


def datum(**kw: Any) -> Datum:
    base: dict[str, Any] = {"name": "M", "unit": "Count", "dims": (("InstanceId", "i-1"),), "timestamp": NOW}
    base.update(kw)
    return Datum(**base)


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"value": math.nan}, "NaN"),
        ({"value": math.inf}, "NaN or infinite"),
        ({"value": -math.inf}, "infinite"),
        ({"value": 2.0**361}, "2^360"),
        ({"dims": tuple((f"D{i}", "v") for i in range(31))}, "more than 30 dimensions"),
        ({"dims": (("D", ""),)}, "empty dimension value"),
        ({"dims": (("D", "x" * 1025),)}, "longer than 1024"),
        ({"dims": (("D", "é"),)}, "ASCII"),
        ({"dims": (("D", "a"), ("D", "b"))}, "given twice"),
        ({"name": ""}, "empty metric name"),
        ({"name": "x" * 256}, "longer than 255"),
        ({"unit": "Percentage"}, "unknown unit"),
        ({"resolution": 5}, "storage resolution"),
        ({"values": [float(i) for i in range(151)], "counts": [1] * 151}, "more than 150 values"),
        ({"values": [1.0, 2.0], "counts": [1]}, "differ in length"),
        ({"values": [1.0, math.nan], "counts": [1, 1]}, "NaN"),
        ({"values": [1.0], "counts": [0]}, "count not positive"),
        ({"timestamp": NOW - MAX_AGE_SECONDS}, "timestamp"),
        ({"timestamp": NOW + 2 * 3600}, "timestamp"),
    ],
)
def test_rejected_datums(kw: dict[str, Any], why: str) -> None:
    assert why in check_datum(datum(**kw), NOW)


def test_accepted_edges() -> None:
    assert check_datum(datum(dims=tuple((f"D{i}", "v") for i in range(30))), NOW) == ""
    assert check_datum(datum(values=[float(i) for i in range(150)], counts=[2] * 150), NOW) == ""
    assert check_datum(datum(value=-(2.0**360)), NOW) == ""
    assert check_datum(datum(timestamp=NOW - 13 * 24 * 3600), NOW) == ""
    assert check_datum(datum(timestamp=NOW + 3600), NOW) == ""


def test_namespace_rules() -> None:
    assert check_namespace("neuron_monitor") == ""
    assert "AWS/" in check_namespace("AWS/Neuron")
    assert "':'" in check_namespace(":x")
    assert "empty" in check_namespace("")


def test_filter_counts_rejections_by_reason() -> None:
    keep = DatumFilter()
    kept = keep.keep_valid([datum(), datum(value=math.nan), datum(value=math.inf), datum(unit="x")], now=NOW)
    assert len(kept) == 1
    assert sum(keep.rejected.values()) == 3 and keep.rejected["value is NaN or infinite"] == 2


def json_request_size(batch: list[Datum]) -> int:
    return len(json.dumps({"Namespace": "neuron_monitor", "MetricData": [d.to_api() for d in batch]}))


def test_one_request_per_report_when_it_fits(trn1_report: dict[str, Any]) -> None:
    datums = ReportMapper().map(trn1_report, now=NOW)
    assert 500 < len(datums) < 1000
    requests = pack_all(datums)
    assert len(requests) == 1 and len(requests[0]) == len(datums)


def test_big_report_splits_at_1000(trn1_report: dict[str, Any]) -> None:
    datums = [datum(name=f"M{i}", value=float(i)) for i in range(2500)]
    requests = pack_all(datums)
    assert [len(r) for r in requests] == [1000, 1000, 500]


def test_backlog_merges_same_minute_into_values(trn1_report: dict[str, Any]) -> None:
    reports = report_sequence(trn1_report, 12, start=NOW - NOW % 60, step=5.0)  # 12 reports in one minute
    datums = [d for r in reports for d in ReportMapper().map(r)]
    requests = pack_all(datums)
    per_report = len(datums) // 12
    assert len(requests) == 1 and len(requests[0]) == per_report
    assert sum(d.samples() for d in requests[0]) == len(datums)
    util = [d for d in requests[0] if d.name == "NeuronCoreUtilization"]
    assert max(d.samples() for d in util) == 12


def test_high_resolution_never_merges_across_seconds() -> None:
    datums = [datum(timestamp=NOW + i, value=float(i), resolution=1) for i in range(5)]
    assert len(pack_all(datums)[0]) == 5
    datums = [datum(timestamp=NOW + 0.1 * i, value=float(i), resolution=1) for i in range(5)]
    assert len(pack_all(datums)[0]) == 1


def test_size_limit_binds_with_many_values() -> None:
    datums = [
        datum(name=f"Metric{i:04d}", values=[float(j) + i / 7 for j in range(150)], counts=[1] * 150)
        for i in range(400)
    ]
    requests = pack_all(datums, protocol="query")
    assert len(requests) > 1
    for r in requests:
        assert len(r) <= 1000
        assert sum(d.wire_size("query") for d in r) <= 1_000_000
        assert json_request_size(r) <= 1_000_000


datum_st = st.builds(
    lambda name, dim, ts, v, res: Datum(name, "Count", (("InstanceId", dim),), NOW + ts, v, resolution=res),
    st.sampled_from(["A", "B", 'C"\\x' * 3, "Longer" * 40]),  # valid names (ASCII) that need escaping
    # valid dimension values: printable ASCII with a non-blank character (a blank one is refused: check_datum)
    st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=300).filter(str.strip),
    st.floats(0, 300),
    st.one_of(st.integers(-(10**6), 10**6).map(float), st.floats(-1e100, 1e100, allow_nan=False)),
    st.sampled_from([1, 60]),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(datum_st, max_size=1500), st.sampled_from(["json", "query"]), st.integers(20_000, 1_000_000))
def test_packing_keeps_limits_and_every_sample_once(datums: list[Datum], protocol: str, max_bytes: int) -> None:
    requests = pack_all(datums, protocol=protocol, max_bytes=max_bytes)
    seen: dict[tuple[Any, ...], list[float]] = {}
    for r in requests:
        assert 1 <= len(r) <= 1000
        if len(r) > 1:
            assert json_request_size(r) <= max_bytes  # our estimate bounds the real JSON encoding
        for d in r:
            assert check_datum(d, NOW) == ""
            for v, c in d.sample_values():
                seen.setdefault((d.name, d.dims, d.resolution, int(d.timestamp // d.resolution)), []).extend([v] * c)
    want: dict[tuple[Any, ...], list[float]] = {}
    for d in datums:
        want.setdefault((d.name, d.dims, d.resolution, int(d.timestamp // d.resolution)), []).append(d.value)
    assert {k: sorted(v) for k, v in seen.items()} == {k: sorted(v) for k, v in want.items()}


def test_buffer_drops_oldest_and_counts() -> None:
    buf = DatumBuffer(max_samples=1000, log_interval=3600)
    buf.put([datum(value=float(i)) for i in range(1500)])
    assert buf.samples == 1000 and buf.dropped_samples == 500
    first = buf.take(lambda q: pack(q, max_datums=10, merge=False))
    assert [d.value for d in first] == [float(i) for i in range(500, 510)]
    buf.requeue(first)  # a failed request goes back in front
    again = buf.take(lambda q: pack(q, max_datums=10, merge=False))
    assert [d.value for d in again] == [d.value for d in first]
    buf.requeue(again)
    buf.put([datum(value=-1.0)] * 10)  # overflow drops the requeued (oldest) ones first
    assert buf.dropped_samples == 510 and buf.samples == 1000


def test_buffer_take_waits_and_close_releases() -> None:
    buf = DatumBuffer()
    t0 = time.monotonic()
    assert buf.take(pack, timeout=0.2) == [] and time.monotonic() - t0 >= 0.15
    buf.close()
    assert buf.take(pack, timeout=5) == []
    buf.put([datum()])
    assert deque(buf.drain())


def test_backlog_bigger_than_one_request_still_merges() -> None:
    """Reports of 1300 series (a trn2.48xlarge is about that): 8 queued reports drain in 2 calls, not 11."""
    start = NOW - NOW % 60
    datums = [datum(name=f"M{i}", value=float(r), timestamp=start + r) for r in range(8) for i in range(1300)]
    requests = pack_all(datums)
    assert [len(r) for r in requests] == [1000, 300]
    assert [sum(d.samples() for d in r) for r in requests] == [8000, 2400]
    assert {d.name for d in requests[0]}.isdisjoint({d.name for d in requests[1]})


def test_a_blank_dimension_is_refused_and_left_out() -> None:
    from neuron_monitor.exporters.cloudwatch.dimensions import clean_dims

    assert check_datum(datum(dims=(("RuntimeTag", "  "),)), NOW) == "dimension value is blank"
    assert check_datum(datum(dims=((" ", "v"),)), NOW) == "dimension name is blank"
    assert check_datum(datum(dims=(("RuntimeTag", " a "),)), NOW) == ""
    assert clean_dims([("ClusterName", " \t"), ("NodeName", "n1")]) == (("NodeName", "n1"),)
