"""Kubernetes manifests: validated offline against the bundled Kubernetes schemas (kubernetes-validate), the
ServiceMonitor against a schema written from the Prometheus Operator's documented fields, and cross-checked
with each other and with the real CLIs and config loader."""

from __future__ import annotations

import copy
import http.client
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import orjson
import pytest
import yaml

from neuron_monitor.daemon.config import plan_from_data
from tests.hostile.test_listen_loopback import announced_port, listening_addresses

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "kubernetes"
VERSIONS = ("1.28.0", kubernetes_validate.latest_version())

# monitoring.coreos.com/v1 ServiceMonitor: the fields this project uses, as the Prometheus Operator's API
# reference documents them (spec.selector required; endpoints[] with port/path/scheme/interval/scrapeTimeout/
# honorLabels/relabelings; namespaceSelector any|matchNames; jobLabel; targetLabels; podTargetLabels).
DURATION = {
    "type": "string",
    "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
}
LABEL_SELECTOR = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        "matchExpressions": {"type": "array"},
    },
}
RELABEL = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "sourceLabels": {"type": "array", "items": {"type": "string", "pattern": r"^[a-zA-Z_][a-zA-Z0-9_]*$"}},
        "separator": {"type": "string"},
        "targetLabel": {"type": "string"},
        "regex": {"type": "string"},
        "modulus": {"type": "integer"},
        "replacement": {"type": "string"},
        "action": {
            "enum": [
                "replace",
                "keep",
                "drop",
                "hashmod",
                "labelmap",
                "labeldrop",
                "labelkeep",
                "lowercase",
                "uppercase",
                "keepequal",
                "dropequal",
            ]
        },
    },
}
SERVICE_MONITOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}, "labels": {"type": "object"}},
        },
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "jobLabel": {"type": "string"},
                "targetLabels": {"type": "array", "items": {"type": "string"}},
                "podTargetLabels": {"type": "array", "items": {"type": "string"}},
                "selector": LABEL_SELECTOR,
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "targetPort": {"type": ["string", "integer"]},
                            "path": {"type": "string", "pattern": "^/"},
                            "scheme": {"enum": ["http", "https"]},
                            "interval": DURATION,
                            "scrapeTimeout": DURATION,
                            "honorLabels": {"type": "boolean"},
                            "honorTimestamps": {"type": "boolean"},
                            "relabelings": {"type": "array", "items": RELABEL},
                            "metricRelabelings": {"type": "array", "items": RELABEL},
                        },
                    },
                },
            },
        },
    },
}


def load_all() -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        assert len(docs) == 1, path
        kind = docs[0]["kind"]
        out[kind if kind not in out else f"{kind}/{docs[0]['metadata']['name']}"] = docs[0]
    return out


MANIFESTS = load_all()


def duration_seconds(text: str) -> float:
    return sum(float(n) * {"s": 1, "m": 60, "h": 3600}[u] for n, u in re.findall(r"(\d+)([smh])", text))


def test_kustomization_lists_every_manifest() -> None:
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kust["resources"]) == files
    assert {"DaemonSet", "Service", "ServiceMonitor", "ConfigMap"} <= set(MANIFESTS)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", sorted(k for k in MANIFESTS if k not in ("ServiceMonitor", "PrometheusRule")))
def test_builtin_kinds_validate_against_kubernetes_schemas(kind: str, version: str) -> None:
    kubernetes_validate.validate(MANIFESTS[kind], version, strict=True)


def test_kubernetes_validation_can_fail() -> None:
    broken = copy.deepcopy(MANIFESTS["DaemonSet"])
    broken["spec"]["replicas"] = 3  # DaemonSets have no replicas
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[-1], strict=True)


def test_service_monitor_matches_documented_schema() -> None:
    jsonschema.validate(MANIFESTS["ServiceMonitor"], SERVICE_MONITOR_SCHEMA)
    broken = copy.deepcopy(MANIFESTS["ServiceMonitor"])
    broken["spec"]["endpoints"][0]["intervall"] = "15s"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, SERVICE_MONITOR_SCHEMA)


def test_service_and_service_monitor_select_the_daemonset_pods() -> None:
    ds, svc, sm = MANIFESTS["DaemonSet"], MANIFESTS["Service"], MANIFESTS["ServiceMonitor"]
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert svc["metadata"]["namespace"] in sm["spec"]["namespaceSelector"]["matchNames"]
    ports = {p["name"] for c in ds["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
    assert svc["spec"]["ports"][0]["targetPort"] in ports
    endpoint = sm["spec"]["endpoints"][0]
    assert endpoint["port"] == svc["spec"]["ports"][0]["name"]
    assert duration_seconds(endpoint["scrapeTimeout"]) < duration_seconds(endpoint["interval"])


def test_scheduling_uses_labels_and_resources_not_instance_types() -> None:
    spec = MANIFESTS["DaemonSet"]["spec"]["template"]["spec"]
    text = orjson.dumps(spec["affinity"]).decode()
    assert "instance-type" not in text
    assert not re.search(r"\b(trn|inf)\d", text)
    keys = {
        e["key"]
        for t in spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        for e in t["matchExpressions"]
    }
    assert "karpenter.k8s.aws/instance-accelerator-manufacturer" in keys
    tolerated = {t["key"] for t in spec["tolerations"]}
    assert {"aws.amazon.com/neuron", "aws.amazon.com/neuroncore"} <= tolerated
    # the monitor must never take devices away from workloads
    for c in spec["containers"]:
        for kind in ("requests", "limits"):
            assert not any(k.startswith("aws.amazon.com/") for k in c["resources"][kind])


def test_every_container_has_requests_and_limits_within_the_footprint_budget() -> None:
    spec = MANIFESTS["DaemonSet"]["spec"]["template"]["spec"]
    for c in spec["containers"] + spec["initContainers"]:
        req, lim = c["resources"]["requests"], c["resources"]["limits"]
        assert set(req) == set(lim) == {"cpu", "memory"}, c["name"]
        assert lim["memory"].endswith("Mi") and int(lim["memory"][:-2]) <= 256, c["name"]
        assert int(req["memory"][:-2]) <= int(lim["memory"][:-2])
        assert int(req["cpu"][:-1]) <= int(lim["cpu"][:-1])


def test_daemon_reads_the_host_through_root_and_pipe_is_shared() -> None:
    spec = MANIFESTS["DaemonSet"]["spec"]["template"]["spec"]
    daemon, exporter = (next(c for c in spec["containers"] if c["name"] == n) for n in ("neuron-monitor", "exporter"))
    cmd = daemon["command"][-1]
    assert "--root /host" in cmd and "--k8s-info" in cmd
    mounts = {m["mountPath"]: m["name"] for m in daemon["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    for host_dir in ("proc", "sys", "dev"):
        assert volumes[mounts[f"/host/{host_dir}"]]["hostPath"]["path"] == f"/{host_dir}"
    sock_dir = "/var/lib/kubelet/pod-resources"
    assert volumes[mounts[sock_dir]]["hostPath"]["path"] == sock_dir
    fifo = "/run/neuron-monitor/reports"
    assert f"1<>{fifo}" in cmd and f"0<>{exporter['command'][-1].split('0<>')[1]}" == f"0<>{fifo}"
    assert fifo in spec["initContainers"][0]["command"][-1]
    assert exporter["securityContext"]["runAsNonRoot"] is True
    assert exporter["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert all(c["securityContext"]["readOnlyRootFilesystem"] for c in spec["containers"])


def test_exporter_probes_are_livez_for_liveness_and_readyz_for_readiness() -> None:
    spec = MANIFESTS["DaemonSet"]["spec"]["template"]["spec"]
    exporter = next(c for c in spec["containers"] if c["name"] == "exporter")
    assert exporter["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "metrics"}
    assert exporter["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    for probe in ("livenessProbe", "readinessProbe"):
        assert exporter[probe]["timeoutSeconds"] < exporter[probe]["periodSeconds"]


def test_configmap_is_the_shipped_monitor_conf_and_loads() -> None:
    conf = MANIFESTS["ConfigMap"]["data"]["monitor.conf"]
    assert orjson.loads(conf) == orjson.loads((REPO / "configs" / "monitor.conf").read_bytes())
    plan = plan_from_data(orjson.loads(conf), "configmap")
    assert plan.runtime_scopes and plan.system_groups


@pytest.mark.parametrize(
    ("container", "module"),
    [("neuron-monitor", "neuron_monitor.daemon.cli"), ("exporter", "neuron_monitor.exporters.prometheus.cli")],
)
def test_container_flags_exist_in_the_real_commands(container: str, module: str) -> None:
    spec = MANIFESTS["DaemonSet"]["spec"]["template"]["spec"]
    cmd = next(c for c in spec["containers"] if c["name"] == container)["command"][-1]
    flags = set(re.findall(r"(?<!\S)(--[a-z0-9-]+)", cmd))
    assert flags
    help_text = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, cwd=REPO, timeout=60, check=True
    ).stdout
    for flag in flags:
        assert flag in help_text, f"{container}: {flag} is not an option of {module}"


def test_the_exporter_listens_where_the_probes_and_prometheus_connect(tmp_path: Path) -> None:
    """The pod runs on the host network, so its IP is the node's (IPv6 in an IPv6 EKS cluster): the kubelet's
    probes and Prometheus (through the headless Service) connect to the node's address, never to 127.0.0.1. The
    exporter's command, run for real with only the port and the FIFO's path changed, must therefore listen on
    every address, IPv6 and IPv4 (the kernel's socket table says so), and the probes' paths must answer there.

    Before (found 2026-11-29): the exporter's ``--bind`` default became 127.0.0.1 and the command passed none, so
    every pod failed its probes (connection refused on the node's IP) and no Prometheus could scrape it."""
    spec = MANIFESTS["DaemonSet"]["spec"]["template"]["spec"]
    exporter = next(c for c in spec["containers"] if c["name"] == "exporter")
    assert spec["hostNetwork"] is True
    port = exporter["ports"][0]["containerPort"]
    cmd = exporter["command"][-1]
    assert f"--port {port} " in cmd
    fifo = tmp_path / "reports"
    os.mkfifo(fifo)
    cmd = cmd.replace(f"--port {port} ", "--port 0 ").replace("/run/neuron-monitor/reports", str(fifo))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.Popen([*exporter["command"][:-1], cmd], stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        served = announced_port(proc)
        addresses = listening_addresses(served)
        ipv6 = Path("/proc/net/tcp6").exists()  # a kernel without IPv6: every IPv4 address (the fallback)
        assert addresses == ["0" * (32 if ipv6 else 8)], (
            f"listening on {addresses} (hex): not every address, so the node's IP is refused"
        )
        for probe in ("livenessProbe", "readinessProbe"):
            for host in ("127.0.0.1", "::1") if ipv6 else ("127.0.0.1",):  # an IPv4 and an IPv6 cluster's probe
                conn = http.client.HTTPConnection(host, served, timeout=30)
                conn.request("GET", exporter[probe]["httpGet"]["path"])
                status = conn.getresponse().status
                conn.close()
                assert status in (200, 503), f"{probe} via {host}: {status}"  # 503 until a report: not a missing path
    finally:
        proc.kill()
        proc.wait(timeout=60)


# kube-prometheus-stack's Prometheus selects ServiceMonitors and PrometheusRules by the label `release: <its helm
# release>` unless told otherwise (serviceMonitorSelectorNilUsesHelmValues / ruleSelectorNilUsesHelmValues, true
# by default in prometheus-community/helm-charts); AWS's Neuron chart labels its PodMonitor the same by default
# (prometheusSelectorLabels: release: kube-prometheus-stack).
KUBE_PROMETHEUS_STACK_SELECTOR = {"release": "kube-prometheus-stack"}


@pytest.mark.parametrize("kind", ["ServiceMonitor", "PrometheusRule"])
def test_a_default_kube_prometheus_stack_selects_the_monitor_and_the_rules(kind: str) -> None:
    """Before (found 2026-11-29): both carried only app.kubernetes.io labels, so the most common operator install
    selected neither: no target, no alert, and nothing said why."""
    labels = MANIFESTS[kind]["metadata"]["labels"]
    assert KUBE_PROMETHEUS_STACK_SELECTOR.items() <= labels.items(), labels
    assert labels["app.kubernetes.io/name"] == "neuron-monitor"  # what other selectors use


def test_running_md_s_release_patch_relabels_both(tmp_path: Path) -> None:
    """The kustomize patch docs/running.md gives for another release name, appended to a copy of the
    kustomization and rendered with the real `kubectl kustomize`: both operator objects carry the new name."""
    from tests.deploy.kustomize import build

    text = (REPO / "docs" / "running.md").read_text()
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "/metadata/labels/release" in b]
    copy_dir = tmp_path / "kubernetes"
    shutil.copytree(K8S, copy_dir)
    with (copy_dir / "kustomization.yaml").open("a") as f:
        f.write(block)
    out = {d["kind"]: d for d in build(copy_dir)}
    assert out["ServiceMonitor"]["metadata"]["labels"]["release"] == "my-prometheus"
    assert out["PrometheusRule"]["metadata"]["labels"]["release"] == "my-prometheus"
    assert "release" not in out["DaemonSet"]["metadata"].get("labels", {})


def test_the_service_monitor_gives_the_job_the_rules_expect() -> None:
    """The operator names a ServiceMonitor's job after the Service, or after the value of the Service label that
    `jobLabel` names when the Service has it (pkg/prometheus/promcfg.go in prometheus-operator); the rules'
    NeuronExporterDown and exporters-down roll-up read `up{job="neuron-monitor"}` (the PodMonitor's twin test is in
    test_kubernetes_aws_values.py)."""
    rules = (REPO / "deploy" / "prometheus" / "neuron-monitor.rules.yml").read_text()
    (expected,) = set(re.findall(r'up\{job="([^"]+)"\}', rules))
    monitor, service = MANIFESTS["ServiceMonitor"], MANIFESTS["Service"]
    job = service["metadata"]["labels"].get(monitor["spec"].get("jobLabel", ""), "") or service["metadata"]["name"]
    assert job == expected
