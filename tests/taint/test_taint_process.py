"""``neuron-monitor-taint`` as a process against the stand-in API server speaking resource.k8s.io/v1: a rule after
the grace period, none for unknown, deleted after recovery, adopted across restarts (by its labels, whatever its
name), a rate limit under a flapping device, the node cap, another node's rules left alone, 403 named clearly."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_monitor.taint.rules import MANAGED_BY, MANAGED_BY_LABEL, NODE_LABEL, TAINT_KEY, build_rule
from tests.k8s.apiserver_stub import StubApiServer

from .helpers import DRIVER, NODE, OTHER_NODE, TaintProcess, api_server

pytestmark = pytest.mark.e2e


@pytest.fixture
def server() -> Iterator[StubApiServer]:
    s = api_server()
    yield s
    s.stop()


def rules_of(server: StubApiServer) -> dict[str, dict]:
    with server._lock:
        return dict(server.taint_rules)


def test_a_rule_after_the_grace_period_then_deleted_after_recovery(server: StubApiServer, tmp_path: Path) -> None:
    taint = TaintProcess(server, tmp_path, "--grace", "1", "--hold", "1", "--effect", "NoSchedule")
    try:
        start = time.monotonic()
        taint.feed({0: "healthy", 3: "unhealthy"}, lambda: rules_of(server), "a rule")
        assert time.monotonic() - start >= 1.0  # not before the grace period
        (rule,) = rules_of(server).values()
        assert rule["apiVersion"] == "resource.k8s.io/v1" and rule["kind"] == "DeviceTaintRule"
        assert rule["spec"]["deviceSelector"] == {"driver": DRIVER, "pool": NODE, "device": "neurondevice3"}
        assert rule["spec"]["taint"] == {"key": TAINT_KEY, "value": "ecc_uncorrected", "effect": "NoSchedule"}
        assert rule["metadata"]["labels"] == {MANAGED_BY_LABEL: MANAGED_BY, NODE_LABEL: NODE}
        assert rule["metadata"]["name"] == f"neuron-monitor-{NODE}-neurondevice3"
        taint.feed({0: "healthy", 3: "healthy"}, lambda: not rules_of(server), "the rule deleted")
        summary = taint.close()
        assert summary["changes"] == {"create": 1, "delete": 1} and summary["rules"] == []
        assert server.writes == {"POST": 1, "DELETE": 1}
        err = taint.stderr()
        assert err.count(": tainted neuron device 3") == 1 and err.count("untainted neuron device 3") == 1
        metrics = taint.metrics.read_text()
        assert 'neuron_monitor_taint_changes_total{action="create"} 1' in metrics
        assert "neuron_monitor_taint_rules 0" in metrics
    finally:
        taint.kill()


def test_unknown_never_taints(server: StubApiServer, tmp_path: Path) -> None:
    taint = TaintProcess(server, tmp_path, "--grace", "0")
    try:
        taint.feed({0: "unknown", 1: "healthy"}, lambda: _reports(taint) >= 20, "20 reports")
        summary = taint.close()
        assert rules_of(server) == {} and summary["changes"] == {} and server.writes == {}
    finally:
        taint.kill()


def _reports(taint: TaintProcess) -> int:
    for line in _m(taint).splitlines():
        if line.startswith("neuron_monitor_taint_reports_total "):
            return int(line.split()[1])
    return 0


def _m(taint: TaintProcess) -> str:
    try:
        return taint.metrics.read_text()
    except FileNotFoundError:
        return ""


def test_its_rules_are_adopted_across_restarts_whatever_their_name(server: StubApiServer, tmp_path: Path) -> None:
    old = build_rule(NODE, DRIVER, NODE, "neurondevice5", "unhealthy_component", "None")
    old["metadata"]["name"] = "renamed-by-an-older-version"
    server.add_rule(old)
    foreign = build_rule(OTHER_NODE, DRIVER, OTHER_NODE, "neurondevice5", "ecc_uncorrected", "None")
    server.add_rule(foreign)
    admins = build_rule(NODE, DRIVER, NODE, "neurondevice6", "x", "NoExecute")
    admins["metadata"]["name"] = "admin-rule"
    admins["metadata"]["labels"] = {"team": "ops"}
    server.add_rule(admins)
    server.ignore_label_selector = True  # even a server that answers every rule: only this node's are touched
    taint = TaintProcess(server, tmp_path, "--grace", "0", "--hold", "1")
    try:
        taint.feed({5: "healthy", 6: "healthy"}, lambda: "renamed-by-an-older-version" not in rules_of(server), "gone")
        summary = taint.close()
        assert summary["changes"] == {"adopt": 1, "delete": 1}
        assert set(rules_of(server)) == {foreign["metadata"]["name"], "admin-rule"}
        assert "adopted rule renamed-by-an-older-version" in taint.stderr()
    finally:
        taint.kill()


def test_a_restart_keeps_the_rule_of_a_device_still_unhealthy(server: StubApiServer, tmp_path: Path) -> None:
    first = TaintProcess(server, tmp_path, "--grace", "0")
    try:
        first.feed({2: "unhealthy"}, lambda: rules_of(server), "a rule")
        first.close()
    finally:
        first.kill()
    second = TaintProcess(server, tmp_path, "--grace", "0", "--effect", "NoExecute")
    try:
        second.feed({2: "unhealthy"}, lambda: server.writes.get("PUT"), "the effect updated")
        summary = second.close()
        assert summary["changes"] == {"adopt": 1, "update": 1}
        (rule,) = rules_of(server).values()
        assert rule["spec"]["taint"]["effect"] == "NoExecute" and server.writes["POST"] == 1
    finally:
        second.kill()


def test_a_flapping_device_cannot_storm_the_api_server(server: StubApiServer, tmp_path: Path) -> None:
    taint = TaintProcess(server, tmp_path, "--grace", "0", "--hold", "0", "--max-changes-per-minute", "3")
    try:
        began = time.monotonic()
        end = began + 4
        flip = 0
        while time.monotonic() < end or "rate_limit" not in _m(taint):
            flip += 1
            taint.send(_report({0: "unhealthy" if flip % 2 else "healthy"}))
            time.sleep(0.1)
            assert flip < 2000
        summary = taint.close()
        windows = int((time.monotonic() - began) // 60) + 1
        made = sum(server.writes.values())
        assert made <= 3 * windows  # 3 a minute, whatever the 40-odd reports asked for
        assert summary["refused"]["rate_limit"] >= 1
        assert 1 <= taint.stderr().count("rate limit: 3 changes a minute reached") <= windows
    finally:
        taint.kill()


def _report(states: dict[int, str]) -> dict:
    from .helpers import health_report

    return health_report(states)


def test_the_node_cap_holds_back_a_whole_node_going_bad(server: StubApiServer, tmp_path: Path) -> None:
    taint = TaintProcess(server, tmp_path, "--grace", "0", "--node-cap", "2")
    try:
        everything = {i: "unhealthy" for i in range(16)}
        taint.feed(everything, lambda: "node_cap" in _m(taint) and len(rules_of(server)) == 2, "the cap")
        summary = taint.close()
        assert len(rules_of(server)) == 2 and summary["refused"]["node_cap"] >= 14
        assert "the node cap of 2 devices is reached" in taint.stderr()
    finally:
        taint.kill()


def test_a_device_the_slices_do_not_name_is_not_tainted_and_named(server: StubApiServer, tmp_path: Path) -> None:
    taint = TaintProcess(server, tmp_path, "--grace", "0")
    try:
        taint.feed({40: "unhealthy"}, lambda: "neuron_monitor_taint_unmapped_devices 1" in _m(taint), "unmapped")
        summary = taint.close()
        assert rules_of(server) == {} and summary["unmapped_devices"] == [40]
        assert "neuron device 40 (ecc_uncorrected) has no DRA device" in taint.stderr()
    finally:
        taint.kill()


def test_slices_of_another_node_are_never_used(server: StubApiServer, tmp_path: Path) -> None:
    server.slices = [s for s in server.slices if s["spec"]["nodeName"] == OTHER_NODE]
    server.ignore_node_selector = True
    taint = TaintProcess(server, tmp_path, "--grace", "0")
    try:
        taint.feed({1: "unhealthy"}, lambda: "neuron_monitor_taint_unmapped_devices 1" in _m(taint), "unmapped")
        taint.close()
        assert rules_of(server) == {}
        assert f"refused slice '{OTHER_NODE}-neuron.aws.com-x1' of node '{OTHER_NODE}'" in taint.stderr()
    finally:
        taint.kill()


def test_a_403_from_the_admission_policy_is_named_clearly(server: StubApiServer, tmp_path: Path) -> None:
    server.deny = lambda method, obj: "only rules of this node's own pool with its labels"
    taint = TaintProcess(server, tmp_path, "--grace", "0")
    try:
        taint.feed({1: "unhealthy"}, lambda: 'status="403"' in _m(taint), "a 403")
        summary = taint.close()
        assert rules_of(server) == {} and summary["api_errors"]["403"] >= 1
        err = taint.stderr()
        assert "HTTP 403" in err and "ValidatingAdmissionPolicy 'neuron-monitor-taint'" in err
        assert "the admission policy neuron-monitor-taint refused it" in err
        assert err.count("HTTP 403") <= 2  # the same error is logged once (plus the summary)
    finally:
        taint.kill()


def test_without_rbac_the_403_names_the_cluster_role(server: StubApiServer, tmp_path: Path) -> None:
    server.fail_next = [403] * 1000
    taint = TaintProcess(server, tmp_path, "--grace", "0")
    try:
        taint.feed({1: "healthy"}, lambda: 'status="403"' in _m(taint), "a 403")
        taint.close()
        assert "RBAC: the service account needs the ClusterRole neuron-monitor-dra-taint" in taint.stderr()
    finally:
        taint.kill()


def test_the_trial_runs_verdict_from_the_rule_status_is_logged(server: StubApiServer, tmp_path: Path) -> None:
    rule = build_rule(NODE, DRIVER, NODE, "neurondevice2", "ecc_uncorrected", "None")
    rule["status"] = {
        "conditions": [
            {"type": "EvictionInProgress", "status": "False", "message": "2 pods would be evicted with NoExecute"}
        ]
    }
    server.add_rule(rule)
    taint = TaintProcess(server, tmp_path, "--grace", "0")
    try:
        taint.feed({2: "unhealthy"}, lambda: "EvictionInProgress" in taint.stderr(), "the status logged")
        taint.close()
        assert "EvictionInProgress False: 2 pods would be evicted with NoExecute" in taint.stderr()
    finally:
        taint.kill()
