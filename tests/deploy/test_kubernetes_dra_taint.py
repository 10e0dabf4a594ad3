"""The taint overlay (deploy/kubernetes-dra-taint) built with the real kustomize: every object valid against the
Kubernetes 1.37 schema (the rules neuron-monitor-taint writes too), the ClusterRole limited to devicetaintrules
and reading ResourceSlices, the token in the taint container only, and the admission policy's CEL evaluated by a
CEL implementation (cel-python) against requests it must allow and requests it must refuse."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import celpy
import kubernetes_validate
import pytest

from neuron_monitor.taint.rules import build_rule
from tests.deploy.kustomize import build

REPO = Path(__file__).resolve().parents[2]
OVERLAY = REPO / "deploy" / "kubernetes-dra-taint"
SA_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
NODE_A = "ip-10-0-1-23.us-west-2.compute.internal"
NODE_B = "ip-10-0-9-99.us-west-2.compute.internal"
USER = "system:serviceaccount:neuron-monitor:neuron-monitor-taint"
NODE_KEY = "authentication.kubernetes.io/node-name"


@pytest.fixture(scope="module")
def built() -> list[dict[str, Any]]:
    return build(OVERLAY)


def named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def test_every_builtin_object_validates(built: list[dict[str, Any]]) -> None:
    kinds = {d["kind"] for d in built}
    assert {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "DaemonSet", "ClusterRole"} <= kinds
    for doc in built:
        if doc["kind"] in ("ServiceMonitor", "PrometheusRule"):
            continue
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_the_rules_neuron_monitor_taint_writes_are_valid_v1_device_taint_rules() -> None:
    for effect in ("None", "NoSchedule", "NoExecute"):
        rule = build_rule(NODE_A, "neuron.aws.com", NODE_A, "neurondevice3", "ecc_uncorrected", effect)
        kubernetes_validate.validate(rule, "1.37.0", strict=True)
    bad = build_rule(NODE_A, "neuron.aws.com", NODE_A, "neurondevice3", "ecc_uncorrected", "None")
    bad["spec"]["deviceSelector"]["selectors"] = []  # not a field of the v1 selector
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, "1.37.0", strict=True)


def test_the_cluster_role_grants_only_taint_rules_and_slice_reads(built: list[dict[str, Any]]) -> None:
    rules = named(built, "ClusterRole", "neuron-monitor-dra-taint")["rules"]
    granted = {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    taint = {("resource.k8s.io", "devicetaintrules", v) for v in ("get", "list", "watch", "create", "update", "delete")}
    assert granted == taint | {
        ("resource.k8s.io", "resourceslices", "get"),
        ("resource.k8s.io", "resourceslices", "list"),
    }
    binding = named(built, "ClusterRoleBinding", "neuron-monitor-dra-taint")
    (subject,) = binding["subjects"]
    ds = named(built, "DaemonSet", "neuron-monitor-taint")
    assert subject["name"] == ds["spec"]["template"]["spec"]["serviceAccountName"] == "neuron-monitor-taint"
    assert f"system:serviceaccount:{subject['namespace']}:{subject['name']}" == USER


def test_only_the_taint_container_has_a_token_and_nothing_runs_as_root(built: list[dict[str, Any]]) -> None:
    spec = named(built, "DaemonSet", "neuron-monitor-taint")["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False and spec["securityContext"]["runAsNonRoot"] is True
    with_token = [c["name"] for c in spec["containers"] if any(m["mountPath"] == SA_PATH for m in c["volumeMounts"])]
    assert with_token == ["taint"]
    taint = next(c for c in spec["containers"] if c["name"] == "taint")
    assert "--effect None" in taint["command"][-1]  # the trial run is the shipped default
    assert taint["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    for c in spec["containers"]:
        assert c["securityContext"]["allowPrivilegeEscalation"] is False and "privileged" not in c["securityContext"]
    # the monitor's own DaemonSet is unchanged: its service account cannot write rules
    monitor = named(built, "DaemonSet", "neuron-monitor")["spec"]["template"]["spec"]
    assert monitor["serviceAccountName"] == "neuron-monitor"


# -- the admission policy, evaluated ---------------------------------------------------------------------------
class Policy:
    """The ValidatingAdmissionPolicy's matchConditions, variables and validations, compiled by cel-python and
    evaluated in order like the API server does (variables lazily named ``variables.<name>``)."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.env = celpy.Environment()
        spec = doc["spec"]
        self.match = [self._compile(m["expression"]) for m in spec["matchConditions"]]
        self.variables = [(v["name"], self._compile(v["expression"])) for v in spec["variables"]]
        self.validations = [
            (self._compile(v["expression"]), v.get("message"), v.get("messageExpression"), v["reason"])
            for v in spec["validations"]
        ]

    def _compile(self, text: str) -> Any:
        return self.env.program(self.env.compile(text))

    def admit(self, operation: str, user: str, node: str | None, obj: Any, old: Any) -> tuple[bool, str]:
        extra = {NODE_KEY: [node]} if node is not None else {}
        activation: dict[str, Any] = {
            "request": celpy.json_to_cel(
                {"operation": operation, "userInfo": {"username": user, "groups": [], "extra": extra}}
            ),
            "object": celpy.json_to_cel(obj),
            "oldObject": celpy.json_to_cel(old),
        }
        if not all(bool(m.evaluate(activation)) for m in self.match):
            return True, "not matched"
        variables: dict[str, Any] = {}
        for name, program in self.variables:  # each sees the ones before it
            activation["variables"] = _map(variables)
            variables[name] = program.evaluate(activation)
        activation["variables"] = _map(variables)
        for program, message, message_expression, reason in self.validations:
            result = program.evaluate(activation)
            if isinstance(result, celpy.CELEvalError):
                raise AssertionError(f"evaluation error: {result}")
            if not bool(result):
                assert reason == "Forbidden"
                text = message or str(self._compile(message_expression).evaluate(activation))
                return False, text
        return True, ""


def _map(values: dict[str, Any]) -> Any:
    return celpy.celtypes.MapType({celpy.celtypes.StringType(k): v for k, v in values.items()})


@pytest.fixture(scope="module")
def policy(built: list[dict[str, Any]]) -> Policy:
    return Policy(named(built, "ValidatingAdmissionPolicy", "neuron-monitor-taint"))


def rule_of(node: str, pool: str | None = None, device: str = "neurondevice3") -> dict[str, Any]:
    obj = build_rule(node, "neuron.aws.com", pool or node, device, "ecc_uncorrected", "None")
    obj["metadata"]["resourceVersion"] = "12"
    return obj


def test_the_binding_denies_with_the_policy(built: list[dict[str, Any]]) -> None:
    binding = named(built, "ValidatingAdmissionPolicyBinding", "neuron-monitor-taint")
    assert binding["spec"] == {"policyName": "neuron-monitor-taint", "validationActions": ["Deny"]}


def test_a_node_may_write_and_delete_its_own_rules(policy: Policy) -> None:
    mine = rule_of(NODE_A)
    assert policy.admit("CREATE", USER, NODE_A, mine, None) == (True, "")
    updated = copy.deepcopy(mine)
    updated["spec"]["taint"]["effect"] = "NoSchedule"
    assert policy.admit("UPDATE", USER, NODE_A, updated, mine) == (True, "")
    assert policy.admit("DELETE", USER, NODE_A, None, mine) == (True, "")


def test_other_users_are_not_this_policys_business(policy: Policy) -> None:
    admin = rule_of(NODE_B)
    admin["metadata"]["labels"] = {"team": "ops"}
    assert policy.admit("CREATE", "kubernetes-admin", None, admin, None) == (True, "not matched")


def labels_of_b(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["labels"]["neuron.aws.com/taint-node"] = NODE_B
    return obj


REFUSED = {
    "another node's pool": ("CREATE", lambda: rule_of(NODE_A, pool=NODE_B), None, "pool"),
    "another node's labels": ("CREATE", lambda: labels_of_b(rule_of(NODE_A)), None, "labelled for this node"),
    "its pool under another label": ("CREATE", lambda: rule_of(NODE_B, pool=NODE_A), None, "labelled"),
    "no labels": ("CREATE", lambda: {**rule_of(NODE_A), "metadata": {"name": "x"}}, None, "labelled"),
    "another driver": (
        "CREATE",
        lambda: {**rule_of(NODE_A), "spec": {**rule_of(NODE_A)["spec"], "deviceSelector": {"pool": NODE_A}}},
        None,
        "pool",
    ),
    "every device of the pool": (
        "CREATE",
        lambda: {
            **rule_of(NODE_A),
            "spec": {**rule_of(NODE_A)["spec"], "deviceSelector": {"driver": "neuron.aws.com", "pool": NODE_A}},
        },
        None,
        "one device",
    ),
    "another taint key": (
        "CREATE",
        lambda: {**rule_of(NODE_A), "spec": {**rule_of(NODE_A)["spec"], "taint": {"key": "x/y", "effect": "None"}}},
        None,
        "taint key",
    ),
    "deleting another node's rule": ("DELETE", lambda: None, lambda: rule_of(NODE_B), "labelled"),
    "taking over another node's rule": ("UPDATE", lambda: rule_of(NODE_A), lambda: rule_of(NODE_B), "wrote"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_node_cannot_touch_rules_that_are_not_its_own(policy: Policy, case: str) -> None:
    operation, obj, old, says = REFUSED[case]
    allowed, message = policy.admit(operation, USER, NODE_A, obj(), old() if old else None)
    assert not allowed and says in message


def test_a_token_that_names_no_node_is_refused(policy: Policy) -> None:
    allowed, message = policy.admit("CREATE", USER, None, rule_of(NODE_A), None)
    assert not allowed and "names no node" in message
