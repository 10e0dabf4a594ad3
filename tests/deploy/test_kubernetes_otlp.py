"""The OTLP overlay (deploy/kubernetes-otlp) built with the real kustomize: every object valid, the exporter
container runs neuron-monitor-otlp on the report FIFO towards the node's port 4318 with no port or probe, nothing
scraped (no Service, no ServiceMonitor), the daemon container unchanged; and the built container's command and
environment, run for real, deliver a report to a receiver on <node IP>:4318."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import orjson
import pytest
import yaml

from tests.deploy.kustomize import build
from tests.exporters.otlp.otlp_helpers import trn2
from tests.exporters.otlp.receiver import Receiver

REPO = Path(__file__).resolve().parents[2]
OVERLAY = REPO / "deploy" / "kubernetes-otlp"
BASE = REPO / "deploy" / "kubernetes"


@pytest.fixture(scope="module")
def built() -> list[dict[str, Any]]:
    return build(OVERLAY)


def containers(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    return {c["name"]: c for c in ds["spec"]["template"]["spec"]["containers"]}


def test_objects_validate_and_nothing_is_scraped(built: list[dict[str, Any]]) -> None:
    kinds = {d["kind"] for d in built}
    assert "DaemonSet" in kinds and not kinds & {"Service", "ServiceMonitor"}
    for doc in built:
        if doc["kind"] == "PrometheusRule":
            continue
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_exporter_pushes_and_the_daemon_is_the_bases(built: list[dict[str, Any]]) -> None:
    ours, base = containers(built), containers(build(BASE))
    # the daemon is the base's, less its liveness probe: that asks the Prometheus exporter's /healthz
    assert "livenessProbe" not in ours["neuron-monitor"]
    assert ours["neuron-monitor"] == {k: v for k, v in base["neuron-monitor"].items() if k != "livenessProbe"}
    exporter = ours["exporter"]
    assert (
        "neuron-monitor-otlp" in exporter["command"][-1] and "0<>/run/neuron-monitor/reports" in exporter["command"][-1]
    )
    assert not {"ports", "livenessProbe", "readinessProbe"} & set(exporter)
    env = {e["name"]: e for e in exporter["env"]}
    assert env["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"]["value"] == "http://$(NODE_IP):4318/v1/metrics"
    assert env["NODE_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert exporter["securityContext"] == base["exporter"]["securityContext"]


def test_the_built_command_delivers_to_the_node_port(built: list[dict[str, Any]]) -> None:
    exporter = containers(built)["exporter"]
    node_ip = f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{random.randint(2, 254)}"
    receiver = Receiver(address=(node_ip, 4318))
    try:
        env = {"PATH": "/usr/bin:/bin", "NODE_IP": node_ip, "NODE_NAME": "node-7"}
        for e in exporter["env"]:
            if "value" in e:  # Kubernetes expands $(VAR) from the variables defined before it
                env[e["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], e["value"])
        command = (
            exporter["command"][-1]
            .replace("exec neuron-monitor-otlp", "")
            .replace("0<>/run/neuron-monitor/reports", "")
        )
        proc = subprocess.run(
            [sys.executable, "-m", "neuron_monitor.exporters.otlp.cli", *command.split()],
            input=orjson.dumps(trn2(0, runtimes=1)) + b"\n",
            capture_output=True,
            env=env,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        request, _closing = receiver.accepted()  # the report, then the exporter's own metrics at end of input
    finally:
        receiver.stop()
    resource = {kv.key: kv.value.string_value for kv in request.resource_metrics[0].resource.attributes}
    assert resource["k8s.node.name"] == "node-7"


def test_overlay_lists_every_file() -> None:
    kust = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())
    listed = {*kust["resources"], *(p["path"] for p in kust["patches"])} - {"../kubernetes"}
    assert listed == {p.name for p in OVERLAY.glob("*.yaml")} - {"kustomization.yaml"}
