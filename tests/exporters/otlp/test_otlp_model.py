"""The OTLP requests of neuron-monitor-otlp, decoded with the official opentelemetry-proto classes: resource, names,
attributes, temporality, start times and values against the Prometheus exporter's view of the same reports, across
a daemon restart and a counter reset; OTLP/JSON equal to protobuf; a report split under a size cap."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from neuron_monitor.exporters.otlp.model import StartTimes
from neuron_monitor.exporters.otlp.naming import OTEL, prometheus_name, quantile, unit_of
from neuron_monitor.exporters.prometheus.collector import ExporterCollector
from neuron_monitor.exporters.prometheus.families import COUNTER, GAUGE, INFO
from neuron_monitor.exporters.prometheus.snapshot import ShapeOptions
from neuron_monitor.exporters.prometheus.state import ExporterState
from tests.exporters.otlp.otlp_helpers import decode, pipeline, trn2
from tests.exporters.otlp.receiver import series

NS = 1_000_000_000
WALL_CLOCK = "neuron_exporter_last_report_timestamp_seconds"  # when a report arrived: differs between two runs


def pushed(reports: list[dict[str, Any]], **kw: Any) -> list[dict[Any, dict[str, Any]]]:
    """The series of each report's request(s), decoded."""
    p = pipeline(**kw)
    out = []
    for report in reports:
        merged: dict[Any, dict[str, Any]] = {}
        for request in p.requests(copy.deepcopy(report)):
            merged.update(series(decode(request.body, json=kw.get("json", False))))
        out.append({k: v for k, v in merged.items() if k[0] != WALL_CLOCK})  # the time a report arrived
    return out


def scraped(reports: list[dict[str, Any]]) -> list[dict[tuple[str, str, tuple[tuple[str, str], ...]], float]]:
    """What neuron-monitor-prometheus serves after each report (its Neuron families and its own
    ``neuron_exporter_*`` ones): (kind, sample name, labels) -> value."""
    state = ExporterState(ShapeOptions())
    collector = ExporterCollector(state)
    out = []
    for report in reports:
        assert state.apply(copy.deepcopy(report))
        view = state.view()
        assert view.shaped is not None
        families = [*view.shaped.families, *collector.self_families(view)]
        out.append(
            {
                (
                    f.kind,
                    f.sample_name,
                    tuple(sorted((k, v) for k, v in zip(f.labelnames, key, strict=False) if v)),
                ): value
                for f in families
                for key, value in f.samples.items()
                if f.name != WALL_CLOCK
            }
        )
    return out


def as_prometheus(points: dict[Any, dict[str, Any]]) -> dict[tuple[str, str, tuple[tuple[str, str], ...]], float]:
    kinds = {"sum": COUNTER, "gauge": GAUGE}
    out = {}
    for (name, attrs), p in points.items():
        kind = INFO if name.endswith("_info") and p["kind"] == "gauge" and not p["unit"] else kinds[p["kind"]]
        sample = name + "_total" if kind == COUNTER else name
        out[(kind, sample, attrs)] = p["value"]
    return out


def test_every_point_is_the_scraped_value_under_the_same_name_and_labels() -> None:
    reports = [trn2(i) for i in range(4)]
    for got, want in zip(pushed(reports), scraped(reports), strict=True):
        got_prom = as_prometheus(got)
        # an info family is a gauge named <name>_info (value 1) in both
        want_prom = {(INFO if k == INFO else k, n, a): v for (k, n, a), v in want.items()}
        assert set(got_prom) == set(want_prom)
        assert got_prom == pytest.approx(want_prom)
        assert len(got) > 1000  # a trn2.48xlarge with 16 runtimes


def test_resource_scope_kinds_units_and_temporality() -> None:
    (points,) = pushed([trn2(0)])
    some = next(iter(points.values()))
    assert some["resource"] == {
        "service.name": "neuron-monitor",
        "service.version": "9.9.9",
        "service.instance.id": "node-a.example",
        "host.name": "node-a.example",
        "host.id": "i-0123456789abcdef0",
        "host.type": "trn2.48xlarge",
        "cloud.provider": "aws",
        "cloud.platform": "aws_ec2",
        "cloud.region": "us-east-2",
        "cloud.availability_zone": "us-east-2b",
        "k8s.node.name": "node-a",
    }
    assert some["scope"] == ("neuron-monitor-otlp", "9.9.9")
    for (name, _), p in points.items():
        assert p["time"] == int(1.7e9) * NS
        if p["kind"] == "sum":
            assert p["monotonic"] is True and p["temporality"] == 2  # CUMULATIVE
            assert 0 < p["start"] < p["time"]
        else:
            assert p["start"] == 0
        if name.endswith("_bytes"):
            assert p["unit"] == "By"
        if name.endswith("_ratio"):
            assert p["unit"] == "1" and p["kind"] == "gauge"
    assert points[next(k for k in points if k[0] == "instance_info")]["value"] == 1.0


def counter_points(points: dict[Any, dict[str, Any]], name: str) -> dict[Any, dict[str, Any]]:
    return {attrs: p for (n, attrs), p in points.items() if n == name}


def test_start_times_survive_gaps_and_a_daemon_restart_and_a_reset_starts_anew() -> None:
    before = [trn2(i) for i in range(3)]
    # a gap of 100 s (no reports), then the daemon restarts: the same runtimes, report_time jumps on
    after_gap = [trn2(i) for i in range(103, 105)]
    # then runtime job-00 exits and a new one comes under the same tag: its counters start again from zero
    restarted = [trn2(i, pid_base=5000) for i in range(105, 107)]
    for r in restarted:
        r["neuron_runtime_data"][0]["report"]["execution_stats"]["period"] = 1.0
    reports = [*before, *after_gap]
    gone = trn2(105)
    gone["neuron_runtime_data"] = gone["neuron_runtime_data"][1:]
    reports += [gone, *restarted]
    results = pushed(reports)
    first = counter_points(results[0], "execution_status")
    tag = ("runtime_tag", "job-00")
    job0 = next(a for a in first if tag in a and ("status_type", "completed") in a)
    start0 = first[job0]["start"]
    assert start0 == int((1.7e9 - 1.0) * NS)  # the first report's period
    for result in results[1:5]:  # the gap and the restarted daemon keep the series' start
        point = counter_points(result, "execution_status")[job0]
        assert point["start"] == start0
        assert point["value"] >= first[job0]["value"]
    assert job0 not in counter_points(results[5], "execution_status")  # the runtime is gone
    back = counter_points(results[6], "execution_status")[job0]
    assert back["start"] > start0 and back["start"] < back["time"]
    assert back["value"] < counter_points(results[4], "execution_status")[job0]["value"]
    # the other runtimes keep theirs
    other = next(a for a in first if ("runtime_tag", "job-05") in a and ("status_type", "completed") in a)
    assert counter_points(results[6], "execution_status")[other]["start"] == first[other]["start"]


def test_a_counter_that_goes_back_gets_a_new_start_time() -> None:
    starts = StartTimes()
    t = 1_700_000_000 * NS
    starts.next_report()
    s0 = starts.start("c", ("a",), 10.0, t, NS)
    starts.next_report()
    assert starts.start("c", ("a",), 12.0, t + NS, NS) == s0
    starts.next_report()
    s2 = starts.start("c", ("a",), 3.0, t + 2 * NS, NS)
    assert t + NS < s2 < t + 2 * NS + 1 and starts.resets == 1
    starts.next_report()
    assert starts.start("c", ("a",), 4.0, t + 3 * NS, NS) == s2


def test_json_carries_the_same_points_as_protobuf() -> None:
    reports = [trn2(i) for i in range(2)]
    assert pushed(reports, json=True) == pushed(reports)


def test_gzip_bodies_decode_to_the_same_points() -> None:
    reports = [trn2(0)]
    assert pushed(reports, gzip_bodies=True) == pushed(reports)


@pytest.mark.parametrize("json", [False, True])
def test_a_report_over_the_size_cap_is_split_and_nothing_is_lost(json: bool) -> None:
    report = trn2(0)
    whole = pushed([report], json=json)[0]
    p = pipeline(json=json, max_bytes=64 * 1024)
    requests = p.requests(copy.deepcopy(report))
    assert len(requests) > 2
    merged: dict[Any, dict[str, Any]] = {}
    for r in requests:
        assert len(r.body) <= 64 * 1024 + 4096
        got = series(decode(r.body, json))
        assert not set(got) & set(merged)
        assert r.points == len(got)
        merged.update(got)
    merged.pop((WALL_CLOCK, ()))
    assert merged == whole


def test_prometheus_units_only_where_the_name_already_ends_in_them() -> None:
    assert unit_of("neuron_runtime_memory_used_bytes", GAUGE) == "By"
    assert unit_of("system_cpu_seconds", COUNTER) == "s"
    assert unit_of("neuroncore_utilization_ratio", GAUGE) == "1"
    assert unit_of("some_ratio", COUNTER) == ""  # the translation appends _ratio to gauges only
    assert unit_of("efa_link_rate_bits_per_second", GAUGE) == ""
    assert unit_of("instance", INFO) == ""


def test_otel_naming() -> None:
    (points,) = pushed([trn2(0)], naming=OTEL)
    names = {n for n, _ in points}
    assert "neuron.neuroncore_utilization" in names and "neuron.runtime_memory_used" in names
    util = next(p for (n, a), p in points.items() if n == "neuron.neuroncore_utilization")
    assert util["unit"] == "1"
    ecc = [(a, p) for (n, a), p in points.items() if n == "hw.errors"]  # the spec's semantic convention
    assert ecc and all(("hw.type", "npu") in a and any(k == "hw.id" for k, _ in a) for a, _ in ecc)
    assert {dict(a)["error.type"] for a, _ in ecc} >= {"mem_ecc_corrected", "mem_ecc_uncorrected"}
    assert all(p["monotonic"] and p["unit"] == "{error}" for _, p in ecc)
    assert not any(n == "neuron.hardware_ecc_events" for n, _ in points)
    assert not any(k in ("instance_id", "region") for n, a in points if n != "neuron.instance_info" for k, _ in a)
    latency = [dict(a) for n, a in points if n == "neuron.execution_latency"]
    assert {a["quantile"] for a in latency} >= {"0.5", "0.99"}
    assert quantile("p99.9") == "0.999" and quantile("max") == "max"


def test_every_spec_family_keeps_its_name_under_the_prometheus_translation() -> None:
    """No counter family has a 'total' word inside its name (the translation would move it to the end)."""
    from neuron_monitor.exporters.prometheus.families import Family
    from neuron_monitor.schema.spec import registry

    for spec in registry().all():
        for fam in spec.prometheus:
            named = prometheus_name(Family(fam.name, fam.kind, fam.help, fam.labels))
            if fam.kind == COUNTER:
                assert "total" not in fam.name.split("_"), fam.name
            assert named.name == fam.name
