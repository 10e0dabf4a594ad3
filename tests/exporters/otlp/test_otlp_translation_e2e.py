"""The same simulated trn2.48xlarge (16 runtimes) through neuron-monitor-prometheus and through
neuron-monitor-otlp: the OTLP points, translated with Prometheus's OTLP rules (``prom_translate``), are the very
series the Prometheus exporter serves, with the same values. Real processes: the simulator and the daemon write
the report lines; both exporters read the same lines on stdin; the OTLP one pushes to a real HTTP receiver.

Debian bookworm's Prometheus (2.42) predates Prometheus's OTLP receiver (2.47, ``--web.enable-otlp-receiver``
since 3.0), so Prometheus's translation runs here as ``prom_translate`` rather than inside a Prometheus server.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.exporters.otlp.otlp_helpers import record_lines, self_metric_names
from tests.exporters.otlp.prom_translate import Series, translate
from tests.exporters.otlp.receiver import Receiver, series
from tests.exporters.prometheus.prom_process import ExporterProcess

pytestmark = pytest.mark.e2e
REPORTS = 4
OWN_PREFIXES = ("process_", "python_")  # the exporter process's own, not pushed
# the exporter's self-metrics are pushed too; these two differ by nature: when a report arrived (wall clock) and the
# staleness window (the scrape side runs with --stale-floor 600)
DIFFERENT = ("neuron_exporter_last_report_timestamp_seconds", "neuron_exporter_stale_after_seconds")


@pytest.fixture(scope="module")
def lines(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    return record_lines(tmp_path_factory.mktemp("otlp"), REPORTS)


def scrape_series(text: str, own: frozenset[str]) -> dict[Series, float]:
    out: dict[Series, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith(OWN_PREFIXES) or s.name in DIFFERENT:
                continue
            if s.name.startswith("neuron_exporter_") and s.name not in own:
                continue  # the HTTP front's own
            out[(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if v)))] = s.value
    return out


def _pushed(protocol: str, lines: list[bytes]) -> tuple[dict[Series, float], dict[Series, float]]:
    """The OTLP points of the last report and of the closing push, translated with Prometheus's OTLP rules."""
    receiver = Receiver()
    try:
        otlp = subprocess.run(
            [sys.executable, "-m", "neuron_monitor.exporters.otlp.cli", "--endpoint", receiver.url,
             "--protocol", protocol, "--host-name", "node-a"],
            input=b"".join(lines),
            capture_output=True,
            timeout=120,
        )  # fmt: skip
        assert otlp.returncode == 0, otlp.stderr.decode()
        requests = receiver.accepted()
        assert len(requests) == REPORTS + 1  # and, at end of input, the exporter's own metrics
        return translate(requests[REPORTS - 1]), translate(requests[-1])
    finally:
        receiver.stop()


@pytest.mark.parametrize("protocol", ["http/protobuf", "http/json"])
def test_translated_points_are_the_prometheus_exporters_series(lines: list[bytes], protocol: str) -> None:
    pushed, closing = _pushed(protocol, lines)
    target_info = [s for s in pushed if s[0] == "target_info"]
    assert len(target_info) == 1
    labels = dict(target_info[0][1])
    assert labels["job"] == "neuron-monitor" and labels["instance"] == "node-a" and labels["host_name"] == "node-a"
    neuron = {
        (name, tuple((k, v) for k, v in labels if k not in ("job", "instance"))): value
        for (name, labels), value in pushed.items()
        if name != "target_info" and name not in DIFFERENT
    }
    assert all(dict(labels).get("instance") == "node-a" for name, labels in pushed if name != "target_info")
    own = self_metric_names(lines[0])
    prom = ExporterProcess("--stale-floor", "600")  # a starved machine may take long between steps
    try:
        prom.send(*lines)
        prom.wait_for("/metrics", lambda s, b: f"neuron_exporter_reports_total {float(REPORTS)}" in b, timeout=60)
        # a scrape serves the newest complete publication (exporters/prometheus/publish.py), which may still be an
        # earlier report's for a moment after the last one was counted: wait until the last report is served (a
        # publication never waits longer than a quarter of the 600 s staleness window)
        deadline = time.monotonic() + 200
        while True:
            _, _, text = prom.get("/metrics")
            scraped = scrape_series(text, own)
            if scraped == pytest.approx(neuron) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        prom.stop()
    assert len(scraped) > 1000
    assert set(neuron) == set(scraped), (sorted(set(neuron) - set(scraped))[:5], sorted(set(scraped) - set(neuron))[:5])
    assert neuron == pytest.approx(scraped)
    # end of input: the exporter's own metrics once more, as a scrape after EOF shows them
    after = {name: value for (name, labels), value in closing.items() if not dict(labels).get("group")}
    assert after["neuron_exporter_up"] == 0 and after["neuron_exporter_input_closed"] == 1
    assert after["neuron_exporter_reports_total"] == REPORTS
    assert {name for name, _ in closing} <= {name for name, _ in pushed}


def test_otel_naming_uses_the_specs_semantic_conventions(lines: list[bytes]) -> None:
    """``--naming otel`` on the simulated host: device health as hw.status (an UpDownCounter per hw.state), ECC
    events as hw.errors (a Counter with error.type), devices as hw.id + hw.type, no instance label on points."""
    receiver = Receiver()
    try:
        otlp = subprocess.run(
            [sys.executable, "-m", "neuron_monitor.exporters.otlp.cli", "--endpoint", receiver.url, "--naming", "otel"],
            input=b"".join(lines),
            capture_output=True,
            timeout=120,
        )
        assert otlp.returncode == 0, otlp.stderr.decode()
        points = series(receiver.accepted()[-2])  # the last report (the closing push follows it)
    finally:
        receiver.stop()
    status = {a: p for (n, a), p in points.items() if n == "hw.status"}
    assert len(status) == 16 * 3  # 16 devices x ok, failed, unknown
    for attrs, p in status.items():
        a = dict(attrs)
        assert a["hw.type"] == "npu" and a["hw.state"] in ("ok", "failed", "unknown") and "hw.id" in a
        assert p["kind"] == "sum" and p["monotonic"] is False and p["temporality"] == 2 and 0 < p["start"] < p["time"]
    assert sum(p["value"] for a, p in status.items() if dict(a)["hw.state"] == "ok") == 16
    errors = [p for (n, _), p in points.items() if n == "hw.errors"]
    assert errors and all(p["monotonic"] and p["unit"] == "{error}" for p in errors)
    assert not any(k in ("instance_id", "instance_type") for n, a in points if not n.endswith("_info") for k, _ in a)
