"""Hostile report input against the Prometheus exporter process: impossible counts and giant label values.

A negative, huge or repeated-overflow count must never be applied (served counters only grow and stay finite,
and client_python's strict OpenMetrics parser accepts the output); a 30 MiB label value must neither blow up the
scrape nor the exporter's memory (peak RSS read from /proc, the exporter keeps answering).
"""

from __future__ import annotations

import http.client
import math
import time
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

from tests.exporters.prometheus.prom_helpers import one, parse
from tests.exporters.prometheus.prom_process import ExporterProcess
from tests.exporters.prometheus.prom_reports import runtime, trn2_report

DEADLINE = 60.0
MIB = 1024 * 1024


def _wait_body(exporter: ExporterProcess, needle: str) -> str:
    """The /metrics body once it contains ``needle``; retries through timeouts on a busy machine."""
    deadline = time.monotonic() + DEADLINE
    last = ""
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", exporter.port, timeout=DEADLINE)
            conn.request("GET", "/metrics")
            last = conn.getresponse().read().decode()
            conn.close()
        except OSError as e:
            last = repr(e)
        if needle in last:
            return last
        time.sleep(0.1)
    alive = exporter.proc.poll() is None
    raise AssertionError(f"{needle!r} never served; exporter alive: {alive}; last: {last[-300:]}")


def _peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/PID/status")


@pytest.mark.e2e
def test_negative_and_overflowing_counts_are_never_applied() -> None:
    exporter = ExporterProcess()
    try:
        good = trn2_report([runtime(1, "a", [0, 1], completed=20)], vcpus=4, devices=2, report_time=1.7e9)
        exporter.send(good)
        exporter.wait_for("/metrics", lambda s, b: 'status_type="completed"' in b, timeout=DEADLINE)
        before = parse(exporter.get("/metrics")[2])
        for i, value in enumerate((-15, 1.7e308, 1.7e308, -1e308)):
            bad = trn2_report([runtime(1, "a", [0, 1], completed=0)], vcpus=4, devices=2, report_time=1.7e9 + i + 1)
            rt = bad["neuron_runtime_data"][0]["report"]
            rt["execution_stats"]["execution_summary"]["completed"] = value
            rt["execution_stats"]["error_summary"]["generic"] = value
            bad["system_data"]["neuron_hw_counters"]["neuron_devices"][0]["mem_ecc_corrected"] = value
            bad["system_data"]["vcpu_usage"]["context_switch_count"] = value
            exporter.send(bad)
        exporter.send(b'{"system_data": {"vcpu_usage": {"period": 1e999}}}')  # not JSON a parser accepts: bad line
        exporter.wait_for(
            "/metrics",
            lambda s, b: 'neuron_exporter_bad_input_total{reason="absurd"} 8.0' in b,
            timeout=DEADLINE,
        )
        after = parse(exporter.get("/metrics")[2])
        assert one(after, "execution_status_total", runtime_tag="a", status_type="completed") == 20
        assert one(after, "neuron_exporter_bad_input_total", reason="negative") == 8
        for key, value in after.items():
            assert math.isfinite(value), key
            if key[0].endswith("_total") and key in before:
                assert value >= before[key], key
        conn = http.client.HTTPConnection("127.0.0.1", exporter.port, timeout=DEADLINE)
        conn.request("GET", "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        text = conn.getresponse().read().decode()
        conn.close()
        samples = [s for fam in parse_openmetrics(text) for s in fam.samples]  # strict: refuses negative counters
        assert samples and all(math.isfinite(s.value) for s in samples)
    finally:
        exporter.stop()


@pytest.mark.e2e
def test_a_30_mib_label_value_stays_small_in_memory_and_in_the_scrape() -> None:
    exporter = ExporterProcess()
    try:
        report = trn2_report([runtime(d, f"job-{d}", [4 * d, 4 * d + 1]) for d in range(16)], report_time=1.7e9)
        report["instance_info"]["instance_name"] = "n" * (30 * MIB)
        exporter.send(report)
        body = _wait_body(exporter, 'neuron_exporter_bad_input_total{reason="label_too_long"} 1.0')
        assert len(body) < 5 * MIB  # 1393 series with a 1 KiB instance_name each, not 30 MiB each
        series = parse(body)
        assert all(len(v) <= 1024 for _, labels in series for _, v in labels)
        small = trn2_report([runtime(1, "a", [0])], vcpus=4, devices=1, report_time=1.7e9 + 1)
        exporter.send(small)
        _wait_body(exporter, 'instance_name="node-a"')
        peak = _peak_rss_bytes(exporter.proc.pid)
        print(f"peak RSS after a 30 MiB label line: {peak / MIB:.0f} MiB")
        assert peak < 200 * MIB, f"peak RSS {peak / MIB:.0f} MiB"
        assert exporter.get("/healthz")[0] == 200
    finally:
        exporter.stop()
