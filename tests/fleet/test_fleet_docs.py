"""docs/fleet.md's scrape configuration for EKS, applied by a real Prometheus.

The snippet discovers pods (`kubernetes_sd_configs`, role pod) and relabels them. Debian's Prometheus is built
without Kubernetes discovery, so the test gives the snippet's relabelling the targets a pod discovery makes, as
static targets with the same `__meta_kubernetes_*` labels (role pod makes one target per declared container port,
and one without a port for a container that declares none: prometheus.io's kubernetes_sd_config): the
DaemonSet's exporter port, its daemon container (no port), a taint pod of deploy/kubernetes-dra-taint (same
app.kubernetes.io/name, no port) and CoreDNS's two ports. Only the exporter may be scraped, under the job the
shipped rules expect, with its node and node group.

Before (found 2026-11-29): the snippet kept every target, so whoever copied it scraped every port of every pod of
the cluster as job "neuron-monitor", and NeuronExporterDown fired for each one that serves no /metrics.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.exporters.prometheus.prom_server import PROMETHEUS, free_port

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not Path(PROMETHEUS).exists(), reason="the prometheus server is not installed"),
]

REPO = Path(__file__).resolve().parents[2]
NODE = {
    "__meta_kubernetes_pod_node_name": "ip-10-0-0-1",
    "__meta_kubernetes_node_label_eks_amazonaws_com_nodegroup": "trn2-a",
}


def pod_target(address: str, namespace: str, labels: dict[str, str], container: str, port: str) -> dict[str, Any]:
    """A static target with the labels Prometheus's pod discovery gives one container port (``port`` "" for a
    container that declares none)."""
    meta = {
        "__meta_kubernetes_namespace": namespace,
        "__meta_kubernetes_pod_container_name": container,
        **{f"__meta_kubernetes_pod_label_{re.sub(r'[^a-zA-Z0-9_]', '_', k)}": v for k, v in labels.items()},
        **NODE,
    }
    if port:
        meta["__meta_kubernetes_pod_container_port_name"] = port
    return {"targets": [address], "labels": meta}


def snippet() -> dict[str, Any]:
    text = (REPO / "docs" / "fleet.md").read_text()
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "kubernetes_sd_configs" in b]
    assert len(blocks) == 1, blocks
    (job,) = yaml.safe_load(blocks[0])["scrape_configs"]
    return dict(job)


def test_the_eks_scrape_config_scrapes_the_exporter_alone(tmp_path: Path) -> None:
    job = snippet()
    (sd,) = job.pop("kubernetes_sd_configs")
    assert sd["role"] == "pod" and sd["attach_metadata"] == {"node": True}
    exporter = {"app.kubernetes.io/name": "neuron-monitor", "app.kubernetes.io/component": "exporter"}
    taint = {**exporter, "app.kubernetes.io/component": "taint"}
    job["static_configs"] = [
        pod_target("127.0.0.1:8000", "neuron-monitor", exporter, "exporter", "metrics"),
        pod_target("127.0.0.3", "neuron-monitor", exporter, "neuron-monitor", ""),
        pod_target("127.0.0.4", "neuron-monitor", taint, "taint", ""),
        pod_target("127.0.0.2:53", "kube-system", {"k8s-app": "kube-dns"}, "coredns", "dns"),
        pod_target("127.0.0.2:9153", "kube-system", {"k8s-app": "kube-dns"}, "coredns", "metrics"),
    ]
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({"global": {"scrape_interval": "1h"}, "scrape_configs": [job]}))
    port = free_port()
    with open(tmp_path / "prometheus.log", "wb") as log:
        prom = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            targets: dict[str, Any] = {}
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/targets", timeout=10) as r:
                        targets = json.loads(r.read())["data"]
                except OSError:
                    targets = {}
                if len(targets.get("activeTargets", [])) + len(targets.get("droppedTargets", [])) == 5:
                    break
                time.sleep(0.5)
            assert targets, (tmp_path / "prometheus.log").read_text()
            active = [t["labels"] for t in targets["activeTargets"]]
            assert len(active) == 1, active
            (labels,) = active
            assert labels["job"] == "neuron-monitor" and labels["instance"] == "127.0.0.1:8000", labels
            assert labels.get("node_group") == "trn2-a" and labels.get("node") == "ip-10-0-0-1", labels
        finally:
            prom.terminate()
            prom.wait(30)
