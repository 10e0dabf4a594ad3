"""The shipped ServiceMonitor (deploy/kubernetes) and PodMonitor (deploy/kubernetes-aws-values) as the Prometheus
Operator turns them into a scrape: a real Prometheus scrapes a real exporter with the target labels the operator
gives every target (`namespace`, `pod`, `service`, `container`, `endpoint` from the discovered pod; honor_labels
from `honorLabels`) and the monitor's own `metricRelabelings` as its metric_relabel_configs.

A runtime's series carry the workload's `namespace` (with `pod_name`, AWS's label names). With honor_labels false
Prometheus renames a scraped label that a target label also sets to `exported_<name>`, so without the monitors'
relabelling every series said namespace="neuron-monitor" (the exporter pod's), the workload's namespace was in
`exported_namespace`, and an alert's description named "pod neuron-monitor/train-0" (found 2026-11-29).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.exporters.prometheus.prom_process import ExporterProcess
from tests.exporters.prometheus.prom_reports import runtime, trn2_report
from tests.exporters.prometheus.prom_server import PROMETHEUS, free_port

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not Path(PROMETHEUS).exists(), reason="the prometheus server is not installed"),
]

REPO = Path(__file__).resolve().parents[2]
SNAKE = {"sourceLabels": "source_labels", "targetLabel": "target_label"}


def monitors() -> dict[str, dict[str, Any]]:
    """The scrape endpoint of each shipped monitor: the base's ServiceMonitor and, when kubectl is there to
    render it, the AWS-values overlay's PodMonitor."""
    docs = list(yaml.safe_load_all((REPO / "deploy" / "kubernetes" / "servicemonitor.yaml").read_text()))
    out = {"ServiceMonitor": docs[0]["spec"]["endpoints"][0]}
    if shutil.which("kubectl") is not None:
        from tests.deploy.kustomize import build

        pm = next(d for d in build(REPO / "deploy" / "kubernetes-aws-values") if d["kind"] == "PodMonitor")
        out["PodMonitor"] = pm["spec"]["podMetricsEndpoints"][0]
    return out


def relabel_config(rule: dict[str, Any]) -> dict[str, Any]:
    """A monitor's relabelling rule (the operator's camelCase fields) as Prometheus's relabel_config."""
    return {SNAKE.get(k, k): v for k, v in rule.items()}


def query(port: int, expr: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        answer = json.loads(r.read())
    assert answer["status"] == "success", answer
    return list(answer["data"]["result"])


@pytest.mark.parametrize("kind", sorted(monitors()))
def test_a_runtime_keeps_its_workload_namespace(kind: str, tmp_path: Path) -> None:
    endpoint = monitors()[kind]
    exporter = ExporterProcess()
    k8s = {"neuroncores_k8s_info": {"0": {"pod_name": "train-0", "namespace": "team-a", "container_name": ["c"]}}}
    prom = None
    try:
        exporter.send(trn2_report([runtime(1, "job-00", [0]), runtime(2, "job-01", [1])], k8s={**k8s, "error": ""}))
        target_labels = {  # what the operator's relabelling gives a pod of the DaemonSet
            "namespace": "neuron-monitor",
            "pod": "neuron-monitor-x7k2p",
            "container": "exporter",
            "endpoint": "metrics",
            **({"service": "neuron-monitor"} if kind == "ServiceMonitor" else {}),
        }
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [
                {
                    "job_name": "neuron-monitor",
                    "honor_labels": bool(endpoint.get("honorLabels", False)),
                    "static_configs": [{"targets": [f"127.0.0.1:{exporter.port}"], "labels": target_labels}],
                    "metric_relabel_configs": [relabel_config(r) for r in endpoint.get("metricRelabelings", [])],
                }
            ],
        }
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        port = free_port()
        log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115 - closed below
        prom = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        found: list[dict[str, Any]] = []
        deadline = time.monotonic() + 120
        while not found and time.monotonic() < deadline:
            with contextlib.suppress(OSError):  # not listening yet
                found = query(port, 'neuroncore_utilization_ratio{runtime_tag="job-00"}')
            time.sleep(0.5)
        assert found, (tmp_path / "prometheus.log").read_text()
        labels = found[0]["metric"]
        assert (labels.get("namespace"), labels.get("pod_name")) == ("team-a", "train-0"), labels
        assert "exported_namespace" not in labels, labels
        # a series of no workload keeps the target's namespace, and nothing else is renamed
        other = query(port, 'neuroncore_utilization_ratio{runtime_tag="job-01"}')[0]["metric"]
        assert other.get("namespace") == "neuron-monitor" and not other.get("pod_name"), other
        exported = query(port, 'count({__name__=~".+", exported_namespace!=""})')
        assert not exported, exported
    finally:
        if prom is not None:
            prom.terminate()
            prom.wait(30)
            log.close()
        exporter.stop()
