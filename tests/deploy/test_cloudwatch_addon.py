"""deploy/kubernetes/cloudwatch-addon: validated offline against the Kubernetes schemas (kubernetes-validate),
rendered by kustomize when kubectl is installed, and cross-checked with the CloudWatch agent's discovery
(tests/deploy/cloudwatch_agent.py), with the real entrypoint's parser and with the daemon's config loader."""

from __future__ import annotations

import copy
import posixpath
from pathlib import Path
from typing import Any

import kubernetes_validate
import orjson
import pytest
import yaml

from neuron_monitor.daemon.config import plan_from_data
from neuron_monitor.daemon.entrypoint import build_pipeline, parse_args
from tests.deploy.cloudwatch_agent import NAMESPACE, SERVICE_LABEL, SERVICE_NAME
from tests.deploy.kustomize import build

REPO = Path(__file__).resolve().parents[2]
ADDON = REPO / "deploy" / "kubernetes" / "cloudwatch-addon"
VERSIONS = ("1.28.0", kubernetes_validate.latest_version())
# the add-on's certificate secret and where the add-on mounts it for AWS's image (aws-observability/helm-charts
# charts/amazon-cloudwatch-observability/templates/linux/neuron-monitor-daemonset.yaml)
CERT_SECRET = "amazon-cloudwatch-observability-agent-cert"
CERT_DIR = "/etc/amazon-cloudwatch-observability-neuron-cert"


def load() -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted(ADDON.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        assert len(docs) == 1, path
        out[docs[0]["kind"]] = docs[0]
    return out


MANIFESTS = load()


def pod_spec() -> dict[str, Any]:
    return MANIFESTS["DaemonSet"]["spec"]["template"]["spec"]


def container() -> dict[str, Any]:
    (c,) = pod_spec()["containers"]
    return c


def mounted_file(path: str) -> tuple[dict[str, Any], str]:
    """The volume a container path is in, and the path inside that volume."""
    for m in container()["volumeMounts"]:
        base = m["mountPath"].rstrip("/")
        if path.startswith(base + "/"):
            volume = next(v for v in pod_spec()["volumes"] if v["name"] == m["name"])
            return volume, posixpath.relpath(path, base)
    raise AssertionError(f"{path} is not in any mounted volume")


def test_kustomization_lists_every_manifest_in_the_agents_namespace() -> None:
    kust = yaml.safe_load((ADDON / "kustomization.yaml").read_text())
    assert set(kust["resources"]) == {p.name for p in ADDON.glob("*.yaml")} - {"kustomization.yaml"}
    assert kust["namespace"] == NAMESPACE
    assert {m["metadata"]["namespace"] for m in MANIFESTS.values()} == {NAMESPACE}
    assert set(MANIFESTS) == {"ServiceAccount", "ConfigMap", "DaemonSet", "Service"}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", sorted(MANIFESTS))
def test_manifests_validate_against_kubernetes_schemas(kind: str, version: str) -> None:
    kubernetes_validate.validate(MANIFESTS[kind], version, strict=True)


def test_validation_can_fail() -> None:
    broken = copy.deepcopy(MANIFESTS["Service"])
    broken["spec"]["internalTrafficPolicy"] = {"local": True}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[-1], strict=True)


def test_the_agent_finds_the_service_and_it_reaches_the_pods_https_port() -> None:
    svc = MANIFESTS["Service"]
    assert svc["metadata"]["name"] == SERVICE_NAME
    assert svc["metadata"]["labels"][SERVICE_LABEL[0]] == SERVICE_LABEL[1]
    assert svc["spec"]["selector"].items() <= MANIFESTS["DaemonSet"]["spec"]["template"]["metadata"]["labels"].items()
    (port,) = svc["spec"]["ports"]
    assert port["port"] == 8000  # the OTel pipeline's static target is neuron-monitor-service:8000
    (cport,) = container()["ports"]
    assert port["targetPort"] == cport["name"] and cport["containerPort"] == 8000


def test_command_is_awss_entrypoint_with_the_addons_paths_and_aws_core_labels() -> None:
    command = container()["command"]
    assert command[0] == "/opt/bin/entrypoint.sh"
    args = parse_args(command[1:])  # the real entrypoint's parser: every flag exists and the values are valid
    assert args.port == container()["ports"][0]["containerPort"]
    assert args.core_labels == "aws"
    assert posixpath.dirname(args.cert_file) == posixpath.dirname(args.key_file) == CERT_DIR
    for path, key in ((args.cert_file, "tls.crt"), (args.key_file, "tls.key")):
        volume, inside = mounted_file(path)
        assert volume["secret"]["secretName"] == CERT_SECRET
        assert {"key": key, "path": inside} in volume["secret"]["items"]
    volume, inside = mounted_file(args.neuron_monitor_config)
    assert volume["configMap"]["name"] == MANIFESTS["ConfigMap"]["metadata"]["name"]
    conf = MANIFESTS["ConfigMap"]["data"][inside]
    plan = plan_from_data(orjson.loads(conf), "configmap")
    assert plan.runtime_scopes and plan.system_groups


def test_the_host_is_read_through_root_and_probes_use_https() -> None:
    env = {e["name"]: e.get("value") for e in container()["env"]}
    root = env["NEURON_MONITOR_ROOT"]
    for host_dir in ("proc", "sys", "dev", "opt/aws"):
        volume, inside = mounted_file(f"{root}/{host_dir}/x")
        assert volume["hostPath"]["path"] == f"/{host_dir}" and inside == "x"
    for probe in ("livenessProbe", "readinessProbe"):
        get = container()[probe]["httpGet"]
        assert get == {"path": "/healthz", "port": "metrics", "scheme": "HTTPS"}
    sc = container()["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["runAsUser"] != 0
    res = container()["resources"]
    assert set(res["requests"]) == set(res["limits"]) == {"cpu", "memory"}
    assert int(res["limits"]["memory"].removesuffix("Mi")) <= 256


def test_the_daemon_keeps_its_fault_event_ledger_in_a_writable_volume() -> None:
    """--state-dir reaches the daemon through the entrypoint and names a volume the non-root user can write."""
    env = {e["name"]: e.get("value") for e in container()["env"]}
    args = build_pipeline(parse_args([]), {"NEURON_MONITOR_DAEMON_ARGS": env["NEURON_MONITOR_DAEMON_ARGS"]}).daemon
    state_dir = args[args.index("--state-dir") + 1]
    volume, inside = mounted_file(f"{state_dir}/fault-events.json")
    assert inside == "fault-events.json" and "emptyDir" in volume


def test_kustomize_renders_the_overlay() -> None:
    docs = build(ADDON)
    assert sorted(d["kind"] for d in docs) == sorted(MANIFESTS)
    assert {d["metadata"]["namespace"] for d in docs} == {NAMESPACE}
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == "neuron-monitor:0.1.0"
    for d in docs:
        kubernetes_validate.validate(d, VERSIONS[-1], strict=True)


def test_the_exporter_listens_where_an_ipv6_cluster_connects() -> None:
    """The add-on's pods are on the pod network: in an IPv6 EKS cluster their one address is IPv6, and the agent and
    the kubelet's probes connect there. The entrypoint (no NEURON_MONITOR_BIND in the manifest) must therefore bind
    every IPv6 and IPv4 address, `::` (which falls back to 0.0.0.0 on a kernel without IPv6). Before (found
    2026-11-29): 0.0.0.0, IPv4 only."""
    assert not pod_spec().get("hostNetwork")
    assert "NEURON_MONITOR_BIND" not in {e["name"] for e in container().get("env", [])}
    exporter = build_pipeline(parse_args(container()["command"][1:]), {}).exporter
    assert exporter[exporter.index("--bind") + 1] == "::"
