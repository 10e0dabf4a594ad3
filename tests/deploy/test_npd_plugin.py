"""The node-problem-detector plugin (deploy/kubernetes/node-problem-detector): the ConfigMap validates, its plugin
config passes NPD's own checks, and its rule's command runs as NPD runs it -- the rule's path and args (``/host``
pointed at a built driver tree), the rule's timeout, the exit code as the condition status (0 OK, 1 NonOK,
2 Unknown, anything else Unknown) and the output cut at ``max_output_length`` as the condition message.

NPD facts (kubernetes/node-problem-detector, pkg/custompluginmonitor/types): exit statuses OK=0, NonOK=1,
Unknown=2; defaults timeout 5s, invoke_interval 30s, max_output_length 80; a rule's timeout may not exceed the
global one; a permanent rule's condition needs a default condition.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

from neuron_monitor.sim.shapes import get_shape
from neuron_monitor.sim.tree import DeviceTree, write_host_files

REPO = Path(__file__).resolve().parents[2]
NPD = REPO / "deploy" / "kubernetes" / "node-problem-detector"
STATUS = {0: "OK", 1: "NonOK", 2: "Unknown"}


def _manifest() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all((NPD / "configmap.yaml").read_text()) if d]
    assert len(docs) == 1
    return docs[0]  # type: ignore[no-any-return]


def _plugin_config() -> dict[str, Any]:
    return json.loads(_manifest()["data"]["neuron-health-monitor.json"])  # type: ignore[no-any-return]


def _seconds(text: str) -> float:
    m = re.fullmatch(r"(\d+)(ms|s|m)", text)
    assert m, text
    return int(m.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0}[m.group(2)]


def test_configmap_validates_and_kustomization_lists_it() -> None:
    kubernetes_validate.validate(_manifest(), kubernetes_validate.latest_version(), strict=True)
    kust = yaml.safe_load((NPD / "kustomization.yaml").read_text())
    assert kust["resources"] == ["configmap.yaml"]


def test_plugin_config_passes_npds_checks() -> None:
    cfg = _plugin_config()
    assert cfg["plugin"] == "custom"
    glob = cfg["pluginConfig"]
    timeout = _seconds(glob["timeout"])
    assert _seconds(glob["invoke_interval"]) >= timeout
    assert isinstance(glob["max_output_length"], int) and glob["max_output_length"] == 80
    conditions = {c["type"] for c in cfg["conditions"]}
    for rule in cfg["rules"]:
        assert _seconds(rule["timeout"]) <= timeout  # NPD refuses a rule timeout above the global one
        assert rule["type"] in ("temporary", "permanent")
        if rule["type"] == "permanent":
            assert rule["condition"] in conditions
        assert rule["path"].endswith("/neuron-monitor-health")
    assert conditions == {"NeuronDeviceUnhealthy"}


def _built_host(root: Path) -> list[DeviceTree]:
    shape = get_shape("inf2.24xlarge")
    write_host_files(root, shape, "2.30.2.0", shape.lnc)
    devs = [DeviceTree(root, shape, i, "2.30.2.0") for i in range(shape.devices)]
    for d in devs:
        assert d.power is not None
        d.power.write(b"POWER_STATUS_VALID,1789180860,10.00,30.00,20.00\n")
    return devs


def run_as_npd(host_root: Path) -> tuple[str, str, float]:
    """The plugin's (status, message, CPU seconds) as NPD would see them: the rule's command with its args, its
    timeout, stdout cut at max_output_length and trimmed."""
    cfg = _plugin_config()
    rule = cfg["rules"][0]
    exe = shutil.which("neuron-monitor-health") or str(Path(sys.executable).parent / "neuron-monitor-health")
    args = [str(host_root) if a == "/host" else a for a in rule["args"]]
    cmd = [exe, *args] if os.path.exists(exe) else [sys.executable, "-m", "neuron_monitor.health.cli", *args]
    before = os.times()
    # the rule's timeout is NPD's deadline; this busy test machine gets more wall time, and the plugin's own CPU
    # time is what must fit the rule's timeout (checked by the caller)
    done = subprocess.run(cmd, capture_output=True, timeout=max(60.0, _seconds(rule["timeout"])), cwd=REPO)
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    status = STATUS.get(done.returncode, "Unknown")
    message = done.stdout.decode("utf-8", "replace")[: cfg["pluginConfig"]["max_output_length"]].strip()
    return status, message, cpu


def test_the_plugin_as_npd_runs_it(tmp_path: Path) -> None:
    devs = _built_host(tmp_path / "host")
    timeout = _seconds(_plugin_config()["rules"][0]["timeout"])
    status, message, cpu = run_as_npd(tmp_path / "host")
    assert (status, message) == ("OK", "healthy: 6 Neuron devices")
    assert cpu < timeout  # the plugin's own work fits NPD's deadline (wall time depends on this machine's load)
    assert devs[5].health is not None and devs[4].health is not None
    devs[5].health.write(b"hbm,link_efa\n")
    devs[4].ecc["mem_ecc_uncorrected"].write(b"2\n")
    status, message, _ = run_as_npd(tmp_path / "host")
    assert status == "NonOK"
    assert message == "unhealthy: neuron_device 4 ecc_uncorrected hbm, 5 unhealthy_component hbm"
    devs[5].health.write(b"\n")
    devs[4].ecc["mem_ecc_uncorrected"].write(b"0\n")
    devs[2].power.write(b"POWER_STATUS_NO_DATA,1789180920,0.00,0.00,0.00\n")  # type: ignore[union-attr]
    status, message, _ = run_as_npd(tmp_path / "host")
    assert (status, message) == ("Unknown", "unknown: neuron_device 2 power_status NO_DATA")
    for d in devs:
        d.close()


def test_no_driver_is_unknown_not_ok(tmp_path: Path) -> None:
    (tmp_path / "host").mkdir()
    status, message, _ = run_as_npd(tmp_path / "host")
    assert status == "Unknown" and message.startswith("unknown: no Neuron device listed")


def test_a_long_message_is_cut_by_npd_but_the_status_stands(tmp_path: Path) -> None:
    devs = _built_host(tmp_path / "host")
    for d in devs:
        assert d.health is not None
        d.health.write(b"hbm,sram,link_efa,link_host,axi_fabric\n")
    status, message, _ = run_as_npd(tmp_path / "host")
    assert status == "NonOK" and len(message) <= 80 and message.startswith("unhealthy: neuron_device 0 ")
    for d in devs:
        d.close()
