"""The simulator's driver layouts (sim/layouts.py, docs/neuron-data.md "Simulated driver layouts"): each
reorganized layout is today's tree with only the documented ancestors moved (every file's name, the directories
right above it and its content kept), writes its own driver version, and the groups' parts write their faults to
the moved files; a tree can be built without a device's ECC, health or power nodes, or lose them while it runs.
These tests check the trees only; the readers' tests run on every layout through ``SIM_LAYOUTS``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from neuron_monitor.sim.animator import Simulator
from neuron_monitor.sim.layouts import REORGANIZED, driver_layout
from neuron_monitor.sim.shapes import get_shape
from neuron_monitor.sim.temporary import TemporarySimulator
from neuron_monitor.sim.tree import DeviceTree, TreeBuilder, write_host_files
from tests.conftest import REPO, SIM_LAYOUTS

DEVICES = "sys/devices/virtual/neuron_device"
# what each reorganized layout moves, as docs/neuron-data.md says: (pattern, replacement) on a path below neuronN/
MOVES: dict[str, list[tuple[str, str]]] = {
    "moved-cores": [(r"^neuron_core(\d+)/", r"cores/neuron_core\1/")],
    "regrouped": [
        (r"^stats/hardware/health_status/", "diagnostics/health_status/"),
        (r"^stats/hardware/", "counters/hardware/"),
        (r"^stats/power/", "telemetry/power/"),
    ],
}
# the node families the readers look for (file name and the directories right above it), per device or per core
DEVICE_TAILS = ("hardware/mem_ecc_uncorrected", "hardware/sram_ecc_uncorrected", "hardware/mem_ecc_corrected",
                "hardware/sram_ecc_corrected", "hardware/mem_ecc_repairable_uncorrected",
                "health_status/unhealthy_components", "health_status/hw_error_event", "power/utilization",
                "memory_usage/host_mem/tensors/total")  # fmt: skip
CORE_TAILS = ("other_info/nc_time_in_use/total", "status/success/total", "memory_usage/device_mem/tensors/total",
              "info/architecture/arch_type")  # fmt: skip


def device_files(root: Path, device: int = 0) -> dict[str, str]:
    """Every file below ``neuronN/`` (relative path -> content)."""
    top = root / DEVICES / f"neuron{device}"
    out = {}
    for dirpath, _, files in os.walk(top):
        for name in files:
            path = Path(dirpath) / name
            out[str(path.relative_to(top))] = path.read_text()
    return out


def build(root: Path, shape: str, driver: str, absent: frozenset[str] = frozenset()) -> list[DeviceTree]:
    s = get_shape(shape)
    builder = TreeBuilder()
    write_host_files(root, s, driver, s.lnc, builder)
    return [DeviceTree(root, s, i, driver, builder, absent if i == 1 else frozenset()) for i in range(s.devices)]


@pytest.fixture
def trees(tmp_path: Path) -> Iterator[Callable[[str, str], Path]]:
    made: list[DeviceTree] = []

    def make(shape: str, driver: str) -> Path:
        root = tmp_path / f"{shape}-{driver}"
        made.extend(build(root, shape, driver))
        return root

    yield make
    for d in made:
        d.close()


def test_the_layouts_and_the_parameter_list() -> None:
    assert SIM_LAYOUTS == ("2.30.2.0", "moved-cores", "regrouped")
    assert {name: r.version for name, r in REORGANIZED.items()} == {"moved-cores": "2.31.0.0", "regrouped": "2.32.0.0"}
    shape = get_shape("trn2.48xlarge")
    assert driver_layout("moved-cores", shape).ver == (2, 31, 0, 0)
    assert driver_layout("2.24.7.0", shape).name == "" and driver_layout(None, get_shape("inf1.xlarge")).version == (
        "2.24.7.0"
    )
    with pytest.raises(ValueError, match=r"neither a version .* nor a layout \(moved-cores, regrouped\)"):
        driver_layout("2.31-beta", shape)


@pytest.mark.parametrize("shape", ["trn2.48xlarge", "trn1.32xlarge", "inf2.xlarge", "inf1.xlarge"])
@pytest.mark.parametrize("layout", list(REORGANIZED))
def test_a_layout_moves_only_the_documented_ancestors(
    trees: Callable[[str, str], Path], shape: str, layout: str
) -> None:
    today = device_files(trees(shape, "2.30.2.0" if shape != "inf1.xlarge" else "2.24.7.0"))
    moved_root = trees(shape, layout)
    moved = device_files(moved_root)

    def move(rel: str) -> str:
        for pattern, replacement in MOVES[layout]:
            rel, n = re.subn(pattern, replacement, rel)
            if n:
                break
        return rel

    if shape == "inf1.xlarge":  # an older default driver: compare with today's layout at the layout's version
        today = device_files(trees(shape, REORGANIZED[layout].version))
    assert {move(rel): content for rel, content in today.items()} == moved
    assert (moved_root / "sys/module/neuron/version").read_text() == REORGANIZED[layout].version + "\n"
    assert (moved_root / "sys/class/neuron_device/neuron0").resolve() == (moved_root / DEVICES / "neuron0").resolve()


@pytest.mark.parametrize("driver", SIM_LAYOUTS)
def test_every_node_is_found_once_by_its_tail(trees: Callable[[str, str], Path], driver: str) -> None:
    files = device_files(trees("trn2.48xlarge", driver), 5)
    for tail in DEVICE_TAILS:
        assert len([rel for rel in files if rel.endswith("/" + tail)]) == 1, (driver, tail)
    for tail in CORE_TAILS:
        found = sorted(rel for rel in files if rel.endswith("/" + tail) and "neuron_core" in rel)
        assert len(found) == 8, (driver, tail, found)
        assert all(f"neuron_core{k}/" in rel for k, rel in enumerate(found)), found
    standard_ecc = "stats/hardware/mem_ecc_uncorrected"
    assert (standard_ecc in files) == (driver != "regrouped")
    assert ("neuron_core0/info/architecture/arch_type" in files) == (driver != "moved-cores")


@pytest.mark.parametrize("driver", SIM_LAYOUTS)
def test_faults_land_in_the_moved_files(tmp_path: Path, driver: str) -> None:
    root = tmp_path / "root"
    sim = Simulator(root, get_shape("inf2.24xlarge"), 1, 3, {"driver": driver, "worker_cpu": 0, "ecc_rate": 0})
    try:
        now = sim.t0
        for _ in range(30):
            now += 0.05
            sim.step(now)
        for cmd in ({"kind": "ecc_uncorrected", "device": 2, "count": 3}, {"kind": "ecc_repairable", "device": 2},
                    {"kind": "unhealthy", "device": 2, "component": "hbm"}, {"kind": "power_no_data", "device": 2},
                    {"kind": "hw_error_event", "device": 2, "count": 4}):  # fmt: skip
            sim.apply(cmd)
        files = device_files(root, 2)
    finally:
        sim.shutdown()

    def at(tail: str) -> str:
        (content,) = [c for rel, c in files.items() if rel.endswith("/" + tail)]
        return content

    assert at("hardware/mem_ecc_uncorrected") == "3\n" and at("hardware/mem_ecc_repairable_uncorrected") == "1\n"
    assert at("health_status/unhealthy_components") == "hbm\n" and at("health_status/hw_error_event") == "4\n"
    assert at("power/utilization").startswith("POWER_STATUS_NO_DATA,")
    busy = [c for rel, c in files.items() if rel.endswith("/other_info/nc_time_in_use/total")]
    assert len(busy) == 2 and any(int(c) > 0 for c in busy)  # the runtime's busy time, counted by the driver


def test_a_device_built_without_its_ecc_and_health_nodes(tmp_path: Path) -> None:
    devs = build(tmp_path, "trn2.48xlarge", "2.30.2.0", frozenset({"ecc", "health"}))
    try:
        files, other = device_files(tmp_path, 1), device_files(tmp_path, 2)
        assert not [rel for rel in files if "ecc" in rel or "health_status" in rel]
        assert "stats/power/utilization" in files and "stats/hardware/mem_ecc_uncorrected" in other
        assert "stats/hardware/health_status/unhealthy_components" in other
        assert devs[1].ecc == {} and devs[1].health is None and devs[2].ecc
    finally:
        for d in devs:
            d.close()


def test_absent_nodes_and_remove_nodes_on_a_running_simulator(tmp_path: Path) -> None:
    root = tmp_path / "root"
    options = {"worker_cpu": 0, "driver": "regrouped", "absent_nodes": {"3": ["ecc", "health"]}}
    sim = Simulator(root, get_shape("trn1.32xlarge"), 1, 0, options)
    try:
        assert not [rel for rel in device_files(root, 3) if "ecc" in rel or "health_status" in rel]
        assert "counters/hardware/mem_ecc_uncorrected" in device_files(root, 4)
        sim.apply({"id": 1, "kind": "ecc_uncorrected", "device": 3})
        sim.apply({"id": 2, "kind": "unhealthy", "device": 3})
        sim.apply({"id": 3, "kind": "remove_nodes", "device": 4, "nodes": ["ecc", "power"]})
        sim.apply({"id": 4, "kind": "remove_nodes", "device": 4, "nodes": ["fans"]})
        sim.apply({"id": 5, "kind": "ecc_corrected", "device": 4})
        sim.step(sim.t0 + 1.5)  # the parts write nothing to what is gone
        left = device_files(root, 4)
        assert not [rel for rel in left if "ecc" in rel or rel.endswith("power/utilization")]
        top = root / DEVICES / "neuron4"
        assert not (top / "counters/hardware").exists() and not (top / "telemetry/power").exists()
        assert "diagnostics/health_status/unhealthy_components" in left
    finally:
        sim.shutdown()
    acks = {}
    for line in (root / "run/neuron-sim/ground_truth.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["event"] == "command":
            acks[event["id"]] = event
    assert acks[1] == {**acks[1], "ok": False, "error": "device 3 has no mem_ecc_uncorrected"}
    assert not acks[2]["ok"] and "exposes no health status" in acks[2]["error"]
    assert acks[3]["ok"] and acks[3]["nodes"] == ["ecc", "power"]
    assert not acks[4]["ok"] and "node families among ecc, health, power" in acks[4]["error"]
    assert acks[5] == {**acks[5], "ok": False, "error": "device 4 has no mem_ecc_corrected"}


@pytest.mark.parametrize("bad", [{"16": ["ecc"]}, {"0": ["fans"]}, ["ecc"]])
def test_bad_absent_nodes_are_refused(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ValueError, match="option absent_nodes"):
        Simulator(tmp_path / "root", get_shape("trn1.32xlarge"), 1, 0, {"worker_cpu": 0, "absent_nodes": bad})


def test_a_bad_driver_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="driver 'newest'"):
        TemporarySimulator("trn1.2xlarge", driver="newest")
    cmd = [sys.executable, "-m", "neuron_monitor.sim.cli", "--shape", "trn1.2xlarge", "--root", str(tmp_path / "r")]
    got = subprocess.run([*cmd, "--driver", "newest"], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert got.returncode == 2 and got.stderr.count("\n") == 1 and "driver 'newest': neither" in got.stderr
    assert not (tmp_path / "r").exists()
    daemon = [sys.executable, "-m", "neuron_monitor.daemon.cli", "--simulate", "trn1.2xlarge", "--once", "--no-imds"]
    got = subprocess.run([*daemon, "--sim-driver", "newest"], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert got.returncode == 2 and got.stderr.count("\n") == 1 and "--simulate: driver 'newest'" in got.stderr


def test_the_layouts_are_listed() -> None:
    cmd = [sys.executable, "-m", "neuron_monitor.sim.cli", "--list-layouts"]
    got = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert got.returncode == 0 and got.stdout.splitlines()[0].startswith("moved-cores  driver 2.31.0.0: each neuron")
    assert [line.split()[0] for line in got.stdout.splitlines()] == list(REORGANIZED)


def test_neuron_monitor_simulates_a_layout(tmp_path: Path) -> None:
    daemon = [sys.executable, "-m", "neuron_monitor.daemon.cli", "--simulate", "inf2.xlarge", "--once", "--no-imds"]
    got = subprocess.run(
        [*daemon, "--sim-driver", "moved-cores"], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert got.returncode == 0, got.stderr[-2000:]
    report = json.loads(got.stdout.splitlines()[-1])
    assert report["neuron_monitor"]["driver_version"] == "2.31.0.0"
