"""deploy/kubernetes-aws-values (issue 43 item 6): this project's DaemonSet set with the value names of AWS's Neuron
Helm chart (`monitor.exporter.port`, `.image`, `.resources`, `.tolerations`, `.priorityClassName`,
`monitor.prometheusPodMonitor.prometheusSelectorLabels`, `.neuronEndpointConfig.interval`), rendered by the real
`kubectl kustomize`: each value reaches its place, a changed value moves with it, the values object itself is not
applied, and the output validates (the built-in kinds against Kubernetes' schemas, the PodMonitor against the
Prometheus Operator's documented fields)."""

from __future__ import annotations

import copy
import re
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.deploy.kustomize import build
from tests.deploy.test_kubernetes import SERVICE_MONITOR_SCHEMA, VERSIONS

REPO = Path(__file__).resolve().parents[2]
OVERLAY = REPO / "deploy" / "kubernetes-aws-values"

if shutil.which("kubectl") is None:  # `make test-tools` installs it (Debian's kubernetes-client)
    pytest.skip("kubectl is not installed (make test-tools)", allow_module_level=True)


def pod_monitor_schema() -> dict[str, Any]:
    """The ServiceMonitor schema of test_kubernetes.py with a PodMonitor's kind and endpoint list."""
    schema = copy.deepcopy(SERVICE_MONITOR_SCHEMA)
    schema["properties"]["kind"] = {"const": "PodMonitor"}
    spec = schema["properties"]["spec"]
    spec["properties"]["podMetricsEndpoints"] = spec["properties"].pop("endpoints")
    spec["required"] = ["selector", "podMetricsEndpoints"]
    return schema


def render(overlay: Path) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in build(overlay)}


def container(daemonset: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in daemonset["spec"]["template"]["spec"]["containers"] if c["name"] == name)


def test_the_values_reach_their_places() -> None:
    values = yaml.safe_load((OVERLAY / "values.yaml").read_text())["monitor"]
    out = render(OVERLAY)
    assert "AwsChartValues" not in out and "ServiceMonitor" not in out  # local to kustomize; a PodMonitor instead
    ds, pm = out["DaemonSet"], out["PodMonitor"]
    pod = ds["spec"]["template"]["spec"]
    exporter = container(ds, "exporter")
    image = f"{values['exporter']['image']['repository']}:{values['exporter']['image']['tag']}"
    assert {c["image"] for c in pod["containers"] + pod["initContainers"]} == {image}
    assert f"--port {values['exporter']['port']} " in exporter["command"][2]
    assert exporter["ports"][0]["containerPort"] == int(values["exporter"]["port"])
    assert container(ds, "neuron-monitor")["livenessProbe"]["httpGet"]["port"] == int(values["exporter"]["port"])
    assert exporter["resources"] == values["exporter"]["resources"]
    assert pod["tolerations"] == values["exporter"]["tolerations"]
    assert pod["priorityClassName"] == values["exporter"]["priorityClassName"]
    assert container(ds, "neuron-monitor")["resources"] != {}  # the daemon keeps its own
    assert pm["metadata"]["labels"] == values["prometheusPodMonitor"]["prometheusSelectorLabels"]
    assert (
        pm["spec"]["podMetricsEndpoints"][0]["interval"]
        == values["prometheusPodMonitor"]["neuronEndpointConfig"]["interval"]
    )
    # the PodMonitor scrapes the DaemonSet's pods on the exporter's port
    assert pm["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    assert pm["spec"]["podMetricsEndpoints"][0]["port"] in {p["name"] for p in exporter["ports"]}
    assert pm["spec"]["namespaceSelector"]["matchNames"] == [ds["metadata"]["namespace"]]


def test_the_output_validates() -> None:
    out = render(OVERLAY)
    jsonschema.validate(out["PodMonitor"], pod_monitor_schema())
    for kind in ("DaemonSet", "Service", "ConfigMap", "Namespace", "ServiceAccount"):
        kubernetes_validate.validate(out[kind], VERSIONS[-1], strict=True)


def test_a_changed_value_moves_with_it(tmp_path: Path) -> None:
    """A copy of the overlay and its base with other values: the port (command, container, Service), the image,
    the scrape interval and the selector labels follow."""
    shutil.copytree(REPO / "deploy" / "kubernetes", tmp_path / "kubernetes")
    shutil.copytree(OVERLAY, tmp_path / "kubernetes-aws-values")
    path = tmp_path / "kubernetes-aws-values" / "values.yaml"
    values = yaml.safe_load(path.read_text())
    values["monitor"]["exporter"]["port"] = "9100"
    values["monitor"]["exporter"]["image"] = {"repository": "123456789012.dkr.ecr.us-west-2.amazonaws.com/nm",
                                              "tag": "0.2.0"}  # fmt: skip
    values["monitor"]["prometheusPodMonitor"]["neuronEndpointConfig"]["interval"] = "30s"
    values["monitor"]["prometheusPodMonitor"]["prometheusSelectorLabels"] = {"release": "prom"}
    path.write_text(yaml.safe_dump(values))
    out = render(tmp_path / "kubernetes-aws-values")
    ds = out["DaemonSet"]
    exporter = container(ds, "exporter")
    assert "--port 9100 " in exporter["command"][2] and exporter["ports"][0]["containerPort"] == 9100
    assert container(ds, "neuron-monitor")["livenessProbe"]["httpGet"]["port"] == 9100  # the exporter's /healthz
    assert out["Service"]["spec"]["ports"][0]["port"] == 9100
    assert exporter["image"] == "123456789012.dkr.ecr.us-west-2.amazonaws.com/nm:0.2.0"
    assert out["PodMonitor"]["spec"]["podMetricsEndpoints"][0]["interval"] == "30s"
    assert out["PodMonitor"]["metadata"]["labels"] == {"release": "prom"}
    assert out["PrometheusRule"]["metadata"]["labels"]["release"] == "prom"  # the same Prometheus selects it
    kubernetes_validate.validate(ds, VERSIONS[-1], strict=True)


def operator_job(monitor: dict[str, Any], labels: dict[str, str]) -> str:
    """The `job` label the Prometheus Operator gives a PodMonitor's targets: "<namespace>/<name>", replaced by the
    value of the pod label that `spec.jobLabel` names when the pod has it non-empty (the operator's generated
    relabelling: target_label job, source __meta_kubernetes_pod_label_<jobLabel>, regex (.+);
    pkg/prometheus/promcfg.go in prometheus-operator/prometheus-operator)."""
    job = f"{monitor['metadata']['namespace']}/{monitor['metadata']['name']}"
    value = labels.get(monitor["spec"].get("jobLabel", ""), "")
    return value or job


def test_the_pod_monitor_gives_the_job_the_rules_expect() -> None:
    """NeuronExporterDown and the fleet's exporters-down roll-up select `up{job="neuron-monitor"}`. Before
    (found 2026-11-29): `jobLabel: jobLabel` named a pod label the DaemonSet's pods do not have, so the job was
    "neuron-monitor/neuron-monitor" and a node whose exporter could not be scraped raised no alert."""
    rules = (REPO / "deploy" / "prometheus" / "neuron-monitor.rules.yml").read_text()
    expected = set(re.findall(r'up\{job="([^"]+)"\}', rules))
    assert len(expected) == 1, expected
    out = render(OVERLAY)
    pod_labels = out["DaemonSet"]["spec"]["template"]["metadata"]["labels"]
    assert operator_job(out["PodMonitor"], pod_labels) == expected.pop()
