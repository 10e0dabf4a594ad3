"""End to end for the alerting rules: simulator with injected faults -> daemon -> exporter -> a real Prometheus
loading deploy/prometheus/neuron-monitor.rules.yml (with shortened windows, see `shortened_rules`).

The faults (a hung runtime, numerical errors, hardware errors, timeouts, failed-to-queue requests, uncorrected ECC)
must each raise their alert at /api/v1/alerts; alerts for conditions that were not injected must stay inactive;
stopping the daemon raises NeuronExporterInputStale. Every wait has a generous deadline.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from neuron_monitor.sim.temporary import TemporarySimulator
from tests.exporters.prometheus.alert_pipeline import (
    LOAD_SENSITIVE,
    RULES,
    Pipeline,
    alerting,
    shortened_rules,
    wait_firing,
)
from tests.exporters.prometheus.prom_server import PROMETHEUS, PrometheusServer

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not Path(PROMETHEUS).exists(), reason="the prometheus server is not installed"),
]

REPO = Path(__file__).resolve().parents[3]
RUNTIME_GROUPS = ("neuroncore_counters", "memory_used", "neuron_runtime_vcpu_usage", "execution_stats")
SYSTEM_GROUPS = ("vcpu_usage", "memory_info", "neuron_hw_counters")
EXPECTED = {
    ("NeuronCoreIdleWithModelsLoaded", "job-00"),
    ("NeuronExecutionErrorRateHigh", "job-01"),
    ("NeuronExecutionHardwareErrors", "job-01"),
    ("NeuronExecutionTimeouts", "job-01"),
    ("NeuronExecutionFailedToQueue", "job-01"),
    ("NeuronDeviceUncorrectedEcc", ""),
    # the configuration is AWS-only, so the daemon adds neuron_device_health (docs/migrating-from-aws.md): the
    # injected uncorrected ECC makes that device's verdict unhealthy too
    ("NeuronDeviceUnhealthy", ""),
}


def test_shortened_rules_change_only_times() -> None:
    short = yaml.safe_load(shortened_rules(RULES.read_text()))
    full = yaml.safe_load(RULES.read_text())
    assert len(short["groups"]) == len(full["groups"])
    for g_short, g_full in zip(short["groups"], full["groups"], strict=True):
        for a, b in zip(g_short["rules"], g_full["rules"], strict=True):
            assert a.get("labels") == b.get("labels") and a.get("annotations") == b.get("annotations")
            assert re.sub(r"\[\w+\]|\* (60|300) ", "", a["expr"]) == re.sub(r"\[\w+\]|\* (60|300) ", "", b["expr"])
            if "for" in b:
                assert a["for"].endswith("s") and 5 <= int(a["for"][:-1]) <= 30


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory, native_mode: str) -> Iterator[tuple[Pipeline, PrometheusServer]]:
    """Made again for each mode (``native_mode``): the pure mode's daemon and exporter must be pure ones. One
    simulated trn1.2xlarge (two runtimes, one core each)."""
    workdir = tmp_path_factory.mktemp("alerts")

    def pipeline() -> Pipeline:
        sim = TemporarySimulator("trn1.2xlarge", runtimes=2, seed=7, exec_rate=100, ecc_rate=0)
        return Pipeline(workdir, sim, RUNTIME_GROUPS, SYSTEM_GROUPS)

    ready = [
        ("sum(neuron_exporter_up)", lambda v: v == 1),
        ("count(neuroncore_utilization_ratio > 0)", lambda v: v == 2),
        ("count(neuron:device_memory_used:ratio)", lambda v: v == 1),
    ]
    with alerting(workdir, pipeline, ready, timeout=60) as made:
        yield made


def _key(alert: dict[str, Any]) -> tuple[str, str]:
    return alert["labels"]["alertname"], alert["labels"].get("runtime_tag", "")


def test_injected_faults_raise_their_alerts_and_nothing_else(system: tuple[Pipeline, PrometheusServer]) -> None:
    pipeline, prom = system
    sim = pipeline.sim
    all_alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r}
    sim.hang_runtime("job-00")
    sim.inject("numerical_burst", tag="job-01", count=600)
    sim.inject("hardware_error", tag="job-01", count=3)
    sim.inject("timeouts", tag="job-01", count=600)
    sim.inject("failed_to_queue_burst", tag="job-01", count=600)
    sim.inject("ecc_uncorrected", device=0, count=2, memory="mem")

    seen = wait_firing(prom, EXPECTED, _key, timeout=150)

    err = seen[("NeuronExecutionErrorRateHigh", "job-01")]["labels"]
    assert err["error_type"] == "numerical" and err["severity"] == "warning"
    ecc = seen[("NeuronDeviceUncorrectedEcc", "")]
    assert ecc["labels"]["neuron_device_index"] == "0" and ecc["labels"]["event_type"] == "mem_ecc_uncorrected"
    assert ecc["labels"]["severity"] == "critical"
    assert "Runtimes on this device: job-00, job-01." in ecc["annotations"]["description"]
    idle = seen[("NeuronCoreIdleWithModelsLoaded", "job-00")]
    assert idle["labels"]["instance"] == pipeline.target and idle["labels"]["neuroncore"] == "0"
    for alert in seen.values():
        for text in alert["annotations"].values():
            assert "error expanding template" not in text and "<no value>" not in text, text
        assert alert["annotations"]["runbook_url"].endswith("#" + alert["labels"]["alertname"].lower())

    # the dashboard's "Firing alerts" panel shows them (the hung core stays hung, so its alert stays on)
    doc = json.loads((REPO / "dashboards" / "neuron-monitor.json").read_text())
    (panel_expr,) = [t["expr"] for p in doc["panels"] if p["title"] == "Firing alerts" for t in p.get("targets", [])]
    expr = panel_expr.replace("$instance", ".*")
    deadline = time.monotonic() + 60
    while "NeuronCoreIdleWithModelsLoaded" not in {r["metric"]["alertname"] for r in prom.query(expr)}:
        assert time.monotonic() < deadline, prom.query(expr)
        time.sleep(0.5)

    must_stay_silent = all_alerts - {name for name, _ in EXPECTED} - LOAD_SENSITIVE
    active = {a["labels"]["alertname"] for a in prom.alerts()}
    assert not active & must_stay_silent, active & must_stay_silent
    # ...and the healthy runtime's core never looked hung, nor did job-01 time out before the burst
    assert ("NeuronCoreIdleWithModelsLoaded", "job-01") not in {_key(a) for a in prom.alerts()}


def test_stopping_the_daemon_raises_input_stale(system: tuple[Pipeline, PrometheusServer]) -> None:
    pipeline, prom = system
    pipeline.daemon.terminate()
    pipeline.daemon.wait(15)
    seen = wait_firing(prom, {("NeuronExporterInputStale", "")}, _key, timeout=120)
    alert = seen[("NeuronExporterInputStale", "")]
    assert alert["labels"]["instance"] == pipeline.target
    assert "its stdin is closed" in alert["annotations"]["description"]
