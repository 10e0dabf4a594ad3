"""The DRA overlay (deploy/kubernetes-dra) built with the real kustomize (kubectl kustomize): every object valid,
the ClusterRole read only and limited to what the DRA lookups use, the token in the daemon container only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.deploy.kustomize import build

REPO = Path(__file__).resolve().parents[2]
OVERLAY = REPO / "deploy" / "kubernetes-dra"
SA_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


@pytest.fixture(scope="module")
def built() -> list[dict[str, Any]]:
    return build(OVERLAY)


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind]
    return doc


def test_every_builtin_object_validates(built: list[dict[str, Any]]) -> None:
    kinds = {d["kind"] for d in built}
    assert {"ClusterRole", "ClusterRoleBinding", "DaemonSet", "ServiceAccount"} <= kinds
    for doc in built:
        if doc["kind"] in ("ServiceMonitor", "PrometheusRule"):
            continue
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_cluster_role_is_read_only_and_narrow(built: list[dict[str, Any]]) -> None:
    rules = one(built, "ClusterRole")["rules"]
    granted = {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    assert granted == {
        ("resource.k8s.io", "resourceslices", "get"),
        ("resource.k8s.io", "resourceslices", "list"),
        ("resource.k8s.io", "resourceclaims", "get"),
    }


def test_binding_names_the_daemonsets_service_account(built: list[dict[str, Any]]) -> None:
    binding = one(built, "ClusterRoleBinding")
    ds = one(built, "DaemonSet")
    assert binding["roleRef"]["name"] == one(built, "ClusterRole")["metadata"]["name"]
    (subject,) = binding["subjects"]
    assert subject["kind"] == "ServiceAccount"
    assert subject["name"] == ds["spec"]["template"]["spec"]["serviceAccountName"]
    assert subject["namespace"] == ds["metadata"]["namespace"]


def test_token_reaches_the_daemon_container_only(built: list[dict[str, Any]]) -> None:
    pod = one(built, "DaemonSet")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    containers = {c["name"]: c for c in pod["containers"]}
    mounts = {c: {m["mountPath"]: m for m in spec.get("volumeMounts", [])} for c, spec in containers.items()}
    assert mounts["neuron-monitor"][SA_PATH]["readOnly"] is True
    assert SA_PATH not in mounts["exporter"]
    volume = next(v for v in pod["volumes"] if v["name"] == mounts["neuron-monitor"][SA_PATH]["name"])
    sources = volume["projected"]["sources"]
    assert any(s.get("serviceAccountToken", {}).get("path") == "token" for s in sources)
    assert any(s.get("configMap", {}).get("name") == "kube-root-ca.crt" for s in sources)


def test_daemon_knows_its_node_and_keeps_its_base_settings(built: list[dict[str, Any]]) -> None:
    pod = one(built, "DaemonSet")["spec"]["template"]["spec"]
    daemon = next(c for c in pod["containers"] if c["name"] == "neuron-monitor")
    env = {e["name"]: e for e in daemon["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert "PYTHONUNBUFFERED" in env  # the patch merged, not replaced, the base's list
    assert "--k8s-info" in daemon["command"][-1]
    assert any(m["mountPath"] == "/var/lib/kubelet/pod-resources" for m in daemon["volumeMounts"])


def test_overlay_files_without_kustomize() -> None:
    """What holds even where kubectl is missing: the RBAC files are valid and read only, every file is listed."""
    kust = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())
    assert "../kubernetes" in kust["resources"]
    listed = {*kust["resources"], *(p["path"] for p in kust["patches"])} - {"../kubernetes"}
    assert listed == {p.name for p in OVERLAY.glob("*.yaml")} - {"kustomization.yaml"}
    for name in ("clusterrole.yaml", "clusterrolebinding.yaml"):
        doc = yaml.safe_load((OVERLAY / name).read_text())
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)
    role = yaml.safe_load((OVERLAY / "clusterrole.yaml").read_text())
    assert {v for rule in role["rules"] for v in rule["verbs"]} <= {"get", "list"}
