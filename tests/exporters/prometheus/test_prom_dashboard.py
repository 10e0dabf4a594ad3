"""The Grafana dashboard: generated file up to date, current schema, datasource and variables, panel coverage."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

from neuron_monitor.exporters.prometheus.snapshot import ShapeOptions
from tests.exporters.prometheus.prom_helpers import feed, parse, scrape
from tests.exporters.prometheus.prom_reports import trn2_report

# a neuron_device_telemetry body as the daemon writes it (one device, one core)
DEVICE_TELEMETRY = {
    "period": 1.0,
    "fresh": True,
    "error": "",
    "neuron_devices": [
        {
            "neuron_device_index": 0,
            "power": {"status": "VALID", "sample_time": 1789180860, "min_percent": 10.0, "max_percent": 30.0,
                      "avg_percent": 20.0},
            "healthy": False,
            "unhealthy_components": ["hbm"],
            "ecc": {"mem_ecc_repairable_uncorrected": 1},
            "device_memory": {"tensors": {"used_bytes": 1024, "peak_bytes": 2048}},
            "host_memory": {"dma_buffers": {"used_bytes": 512, "peak_bytes": 512}},
            "neuroncores": {"0": {"busy_ratio": 0.5, "execution_status": {"success": 3}}},
        }
    ],
}  # fmt: skip

REPO = Path(__file__).resolve().parents[3]
DASHBOARD = REPO / "dashboards" / "neuron-monitor.json"
PROMETHEUS_SERIES = {"ALERTS"}  # written by Prometheus itself from the alerting rules (deploy/prometheus/)


def _builder():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("build_dashboard", REPO / "dashboards" / "build_dashboard.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dashboard_exprs() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]


# a neuron_device_health body as the daemon writes it (one unhealthy device, a finding, an event)
# an efa_counters body as the group writes it (one port of a trn2.48xlarge, joined to Neuron device 0)
EFA_COUNTERS = {
    "period": 5.0,
    "error": "",
    "efa_ports": [
        {
            "efa_device": "rdmap16s27", "port": "1", "pci_address": "0000:10:1b.0", "neuron_device_indexes": [0],
            "state": "ACTIVE", "link_up": True, "rate_gbps": 200.0,
            "counters": {"tx_bytes": 5_000_000, "rx_bytes": 4_000_000, "tx_pkts": 600, "rx_pkts": 500,
                         "retrans_pkts": 3, "impaired_remote_conn_events": 0, "unresponsive_remote_events": 0},
        }
    ],
}  # fmt: skip
DEVICE_HEALTH = {
    "period": 5.0,
    "error": "",
    "node": {"state": "unhealthy", "since": 1.7e9, "device_states": {"healthy": 0, "unhealthy": 1, "unknown": 0}},
    "neuron_devices": [
        {
            "neuron_device_index": 0,
            "health": {
                "state": "unhealthy",
                "since": 1.7e9,
                "reasons": [{"rule": "ecc_uncorrected", "severity": "unhealthy", "detail": "hbm", "message": "m"}],
            },
            "fault_events": {"ecc_uncorrected": {"count": 1, "first_seen": 1.7e9}},
            "fault_totals": {},
        }
    ],
    "watch_interval": 0.5,
}


def test_committed_json_matches_the_builder() -> None:
    assert DASHBOARD.read_text() == _builder().render(), "run python3 dashboards/build_dashboard.py"


def test_dashboard_structure() -> None:
    doc = json.loads(DASHBOARD.read_text())
    assert doc["schemaVersion"] >= 39
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert {"instance", "runtime"} <= set(variables)
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    # two panels of one title showing different figures read as one contradicting itself (the runtimes' memory by
    # category and the driver's both said "Device memory by category")
    titles = [p["title"] for p in doc["panels"] if p["type"] != "row"]
    assert len(titles) == len(set(titles)), sorted(t for t in titles if titles.count(t) > 1)
    for p in doc["panels"]:
        assert p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        if p["type"] != "row":
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert p["targets"]
        for t in p.get("targets", []):
            assert 'instance=~"$instance"' in t["expr"], t["expr"]
    titles = " | ".join(p["title"] for p in doc["panels"]).lower()
    for topic in (
        "fleet",
        "per core",
        "per device",
        "memory by category",
        "executions",
        "errors",
        "latency",
        "ecc",
        "host vcpu",
        "host memory",
        "runtime vcpu",
        "exporter up",
    ):
        assert topic in titles, topic


def test_every_metric_in_the_dashboard_is_one_the_exporter_writes() -> None:
    k8s = {"neuroncores_k8s_info": {"0": {"pod_name": "p", "namespace": "n", "container_name": ["c"]}}, "error": ""}
    report = trn2_report(k8s=k8s)
    report["system_data"]["neuron_device_telemetry"] = DEVICE_TELEMETRY
    report["system_data"]["neuron_device_health"] = DEVICE_HEALTH
    report["system_data"]["efa_counters"] = EFA_COUNTERS
    families = ["hardware/mem_ecc_uncorrected", "health_status/unhealthy_components"]
    report["neuron_monitor"].update(  # what the daemon found of the driver's nodes (neuron_monitor_source_found)
        driver_version="2.31.7.0",
        sources={"neuron_device_health": {"layout": "discovered", "found": dict.fromkeys(families, True)}},
    )
    # every series the exporter can serve (the default series budget has its own check: tests/fleet/)
    emitted = {name for name, _ in parse(scrape(feed([report], ShapeOptions(series_detail="full"))))}
    selectors = [m for expr in dashboard_exprs() for m in re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", expr)]
    assert len(selectors) >= 30
    for name in selectors:
        assert name in emitted or name in PROMETHEUS_SERIES, name
    for pattern in re.findall(r'__name__=~"([^"]+)"', "\n".join(dashboard_exprs())):
        assert [n for n in emitted if re.fullmatch(pattern, n)], pattern
