"""`neuron-monitor --check` as a user runs it: a real daemon process on the simulator (every source there, exit 0,
the EFA join from the driver's answer), on a root missing what a configured group needs (exit 1, the missing
source named), a usage error (exit 2), and the machine form (--json)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from neuron_monitor.sim.layouts import REORGANIZED
from tests.conftest import daemon_cmd

TIMEOUT = 300


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(daemon_cmd(*args), capture_output=True, text=True, timeout=TIMEOUT)


def _config(tmp_path: Path, system: list[str], runtime: list[str] | None = None) -> str:
    conf = {"period": "1s", "system_metrics": [{"type": t} for t in system]}
    if runtime:
        conf["neuron_runtimes"] = [{"tag_filter": ".*", "metrics": [{"type": t} for t in runtime]}]
    path = tmp_path / "monitor.conf"
    path.write_text(json.dumps(conf))
    return str(path)


@pytest.mark.parametrize("shape", ["trn2.48xlarge", "inf2.xlarge"])
def test_simulated_host_has_every_source(shape: str) -> None:
    out = _run("--simulate", shape, "--check", "--json", "--no-imds")
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    assert doc["exit_code"] == 0
    by_source = {s["source"]: s for s in doc["sources"]}
    assert by_source["driver version"]["status"] == "found"
    assert by_source["device 0"]["status"] == "found" and by_source["device 0"]["needed"]
    assert by_source["/dev/neuron0 GET_ALL_APPS_INFO"]["status"] == "found"
    assert by_source["/dev/neuron0 DEVICE_BDF_EXT"]["status"] == "found"
    assert by_source["group neuron_hw_counters"]["status"] == "found"
    if shape == "trn2.48xlarge":  # 16 EFA adapters, each joined to its device through the driver's answer
        assert by_source["EFA join device 15"]["status"] == "found"
        assert "driver ioctl" in by_source["EFA join device 15"]["detail"]
    else:  # no EFA on an inf2: absent, which is no fault
        assert by_source["EFA adapters"]["status"] == "absent" and not by_source["EFA adapters"]["needed"]
    assert any(s["source"].endswith("data block") and s["status"] == "found" for s in doc["sources"])


def test_text_form_ends_with_the_verdict() -> None:
    out = _run("--simulate", "trn1.2xlarge", "--check", "--no-imds")
    assert out.returncode == 0
    assert out.stdout.rstrip().endswith("every source the configured groups need is there (exit 0)")


def test_missing_driver_is_exit_1_naming_it(tmp_path: Path, fake_root_192: Path) -> None:
    conf = _config(tmp_path, ["vcpu_usage", "neuron_hw_counters"])
    out = _run("--root", str(fake_root_192), "-c", conf, "--check", "--no-imds", "--exact-groups")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "! missing    driver version" in out.stdout
    assert "[needed by neuron_hw_counters]" in out.stdout
    assert "missing or unreadable (exit 1)" in out.stdout
    # the same root with host groups only: nothing needed is missing
    conf = _config(tmp_path, ["vcpu_usage", "memory_info"])
    out = _run("--root", str(fake_root_192), "-c", conf, "--check", "--no-imds")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "missing    driver version" in out.stdout  # shown, but no configured group needs it


def test_json_without_check_is_a_usage_error() -> None:
    out = _run("--json")
    assert out.returncode == 2 and "--json goes with --check" in out.stderr


def test_bdf_refused_leaves_the_join_unknown_never_failing(tmp_path: Path) -> None:
    from neuron_monitor.sim.temporary import TemporarySimulator

    with TemporarySimulator("trn1.32xlarge", runtimes=1, seed=3, bdf_ioctl=False) as sim:
        out = _run("--root", str(sim.root), "--check", "--json", "--no-imds")
    doc = json.loads(out.stdout)
    by_source = {s["source"]: s for s in doc["sources"]}
    assert by_source["/dev/neuron0 DEVICE_BDF_EXT"]["status"] == "unknown"
    assert "EINVAL" in by_source["/dev/neuron0 DEVICE_BDF_EXT"]["detail"]
    assert by_source["EFA join device 0"]["status"] == "unknown"
    assert out.returncode == 0  # the join is no source a group needs: its counters are reported without it


@pytest.mark.parametrize("driver", sorted(REORGANIZED))
def test_reorganized_layouts_are_found_and_absent_nodes_named(driver: str) -> None:
    from neuron_monitor.sim.temporary import TemporarySimulator

    with TemporarySimulator("trn2.48xlarge", runtimes=1, seed=2, driver=driver) as sim:
        out = _run("--root", str(sim.root), "--check", "--json", "--no-imds")
    assert out.returncode == 0, out.stdout  # the readers' discovery found every node on the moved layout
    doc = json.loads(out.stdout)
    ecc = [s for s in doc["sources"] if s["source"] == "neuron_hw_counters: hardware/mem_ecc_uncorrected"]
    assert ecc and ecc[0]["status"] == "found"
    # device 3 built without its ECC and health nodes: the families required on a Trainium2 are missing, exit 1
    absent = {"3": ["ecc", "health"]}
    with TemporarySimulator("trn2.48xlarge", runtimes=1, seed=2, driver=driver, absent_nodes=absent) as sim:
        out = _run("--root", str(sim.root), "--check", "--no-imds")
    assert out.returncode == 1, out.stdout
    assert "! missing    neuron_device_health: health_status/unhealthy_components" in out.stdout
    assert "[needed by neuron_device_health]" in out.stdout


def test_families_an_old_driver_never_exposes_are_no_failure() -> None:
    out = _run("--simulate", "inf1.xlarge", "--check", "--json", "--no-imds")
    assert out.returncode == 0, out.stdout
    doc = json.loads(out.stdout)
    ecc = next(s for s in doc["sources"] if s["source"] == "neuron_hw_counters: hardware/mem_ecc_uncorrected")
    assert ecc["status"] == "missing" and not ecc["needed"] and "not expected" in ecc["detail"]
