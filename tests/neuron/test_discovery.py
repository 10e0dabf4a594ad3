"""Layout-tolerant discovery of the driver's nodes (neuron/discovery.py) and what the report says about it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.groups.neuron_device_telemetry.collector import NeuronDeviceTelemetry
from neuron_monitor.groups.neuron_hw_counters.collector import NeuronHwCounters
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import nodes as N
from neuron_monitor.neuron.discovery import DeviceNodes, search
from neuron_monitor.neuron.sysfs import DriverTree
from neuron_monitor.schema.read import read_report
from tests.conftest import SIM_LAYOUTS
from tests.neuron.layouts import CORES_MOVED, DEVICES, LAYOUTS, REGROUPED, build

DEVICE_NODES = (
    N.MEM_ECC_UNCORRECTED,
    N.SRAM_ECC_UNCORRECTED,
    N.MEM_ECC_CORRECTED,
    N.SRAM_ECC_CORRECTED,
    N.MEM_ECC_REPAIRABLE,
    N.UNHEALTHY_COMPONENTS,
    N.HW_ERROR_EVENT,
    N.POWER_UTILIZATION,
    N.HOST_MEM,
)
CORE_NODES = (N.CORE_BUSY, N.CORE_DEVICE_MEM, N.CORE_STATUS)


def test_today_layout_is_known_and_never_searched(tmp_path: Path) -> None:
    build(tmp_path, "trn2.48xlarge", "2.30.2.0")
    nodes = DeviceNodes(RootFS(tmp_path), "sys/class/neuron_device/neuron5")
    for node in DEVICE_NODES:
        assert nodes.find(node).how == "known:stats", node
    for core in range(8):
        for node in CORE_NODES:
            assert nodes.find(node, core).how == "known:stats"
    assert (
        nodes.find(N.CORE_BUSY, 3).rel
        == "sys/class/neuron_device/neuron5/neuron_core3/stats/other_info/nc_time_in_use/total"
    )
    assert nodes._search is None  # today's layout costs no search


def test_pre_2_8_layout_is_known(tmp_path: Path) -> None:
    build(tmp_path, "trn1.2xlarge", "2.7.33.0")
    nodes = DeviceNodes(RootFS(tmp_path), "sys/class/neuron_device/neuron0")
    assert nodes.find(N.MEM_ECC_UNCORRECTED).how == "known:metrics"
    assert nodes.find(N.CORE_STATUS, 1).rel == "sys/class/neuron_device/neuron0/metrics/neuron_core1/stats/status"
    assert nodes._search is None


@pytest.mark.parametrize("moves", [CORES_MOVED, REGROUPED], ids=["cores_moved", "regrouped"])
def test_moved_nodes_are_discovered(tmp_path: Path, moves: dict[str, str]) -> None:
    build(tmp_path, "trn2.48xlarge", "2.30.2.0", moves)
    root = RootFS(tmp_path)
    nodes = DeviceNodes(root, "sys/class/neuron_device/neuron2")
    for node in DEVICE_NODES:
        found = nodes.find(node)
        assert found.rel is not None and found.how in ("known:stats", "discovered"), node
        assert root.exists(found.rel)
    for core in range(8):
        for node in CORE_NODES:
            found = nodes.find(node, core)
            assert found.how in ("known:stats", "discovered"), (node, core)
            assert f"neuron_core{core}/" in (found.rel or ""), (node, core)
            if moves is CORES_MOVED:
                assert found.how == "discovered"
    if moves is REGROUPED:
        assert nodes.find(N.MEM_ECC_UNCORRECTED).rel == (
            "sys/class/neuron_device/neuron2/stats/counters/hardware/mem_ecc_uncorrected"
        )
        assert nodes.find(N.POWER_UTILIZATION).how == "discovered"


def _same_moments(
    tmp_path: Path, group: type[Any], moves: dict[str, str], drop: tuple[str, ...] = (), driver: str = "2.30.2.0"
) -> None:
    """The group on today's layout and on ``moves`` (or on the simulator's layout ``driver``): the same body at the
    same moments."""
    a = build(tmp_path / "a", "trn2.48xlarge", "2.30.2.0")
    b = build(tmp_path / "b", "trn2.48xlarge", driver, moves)
    ga, gb = group(RootFS(tmp_path / "a")), group(RootFS(tmp_path / "b"))
    ga.prime()
    gb.prime()

    def scrub(body: dict[str, Any]) -> dict[str, Any]:
        for dev in body["neuron_devices"]:
            for core in dev.get("neuroncores", {}).values():
                for key in drop:
                    core.pop(key, None)
        return body

    for step in range(3):
        for devs in (a, b):
            devs[1].ecc["mem_ecc_uncorrected"].write(f"{step * 3}\n".encode())
            devs[4].ecc["mem_ecc_repairable_uncorrected"].write(f"{step}\n".encode())
            devs[2].core_files[5]["status/success"].write(f"{step * 10}\n".encode())
        assert scrub(gb.collect()) == scrub(ga.collect())
    assert gb.sources()["layout"] == "discovered" and all(gb.sources()["found"].values())
    assert ga.sources()["layout"] == "known:stats" and all(ga.sources()["found"].values())


@pytest.mark.parametrize("moves", [CORES_MOVED, REGROUPED], ids=["cores_moved", "regrouped"])
def test_groups_report_the_same_on_moved_layouts(tmp_path: Path, moves: dict[str, str]) -> None:
    if moves is CORES_MOVED:  # the hardware counters did not move there: the group recognizes today's layout
        build(tmp_path / "c", "trn2.48xlarge", "2.30.2.0", moves)
        g = NeuronHwCounters(RootFS(tmp_path / "c"))
        g.collect()
        assert g.sources()["layout"] == "known:stats"
    else:
        _same_moments(tmp_path / "hw", NeuronHwCounters, moves)
    _same_moments(tmp_path / "tel", NeuronDeviceTelemetry, moves, drop=("busy_ratio",))


@pytest.mark.parametrize("driver", [d for d in SIM_LAYOUTS if d[0].isalpha()])
def test_groups_report_the_same_on_the_simulators_layouts(tmp_path: Path, driver: str) -> None:
    """The simulator's reorganized layouts (not known to the readers): the same values at the same moments."""
    if driver != "moved-cores":  # there the ECC counters did not move
        _same_moments(tmp_path / "hw", NeuronHwCounters, {}, driver=driver)
    _same_moments(tmp_path / "tel", NeuronDeviceTelemetry, {}, drop=("busy_ratio",), driver=driver)


def test_two_candidates_are_an_error_not_a_guess(tmp_path: Path) -> None:
    build(tmp_path, "trn1.2xlarge", "2.30.2.0", REGROUPED)
    dev = tmp_path / DEVICES / "neuron0"
    os.makedirs(dev / "old/hardware")
    (dev / "old/hardware/mem_ecc_uncorrected").write_bytes(b"9\n")
    g = NeuronHwCounters(RootFS(tmp_path))
    body = g.collect()
    assert "mem_ecc_uncorrected" not in body["neuron_devices"][0]
    assert (
        "hardware/mem_ecc_uncorrected of neuron_device 0: 2 candidates "
        "(old/hardware/mem_ecc_uncorrected, stats/counters/hardware/mem_ecc_uncorrected), none used"
    ) in body["error"]
    assert "mem_ecc_uncorrected not exposed" not in body["error"]
    assert g.sources()["found"]["hardware/mem_ecc_uncorrected"] is False
    assert g.sources()["found"]["hardware/sram_ecc_uncorrected"] is True


def test_found_is_false_when_one_device_lacks_the_node(tmp_path: Path) -> None:
    build(tmp_path, "inf2.24xlarge", "2.30.2.0")
    (tmp_path / DEVICES / "neuron3/stats/hardware/sram_ecc_uncorrected").unlink()
    g = NeuronHwCounters(RootFS(tmp_path))
    body = g.collect()
    assert "sram_ecc_uncorrected not exposed by the driver for neuron_device 3" in body["error"]
    assert "sram_ecc_uncorrected" not in body["neuron_devices"][3]
    sources = g.sources()
    assert sources["layout"] == "known:stats"
    assert sources["found"]["hardware/sram_ecc_uncorrected"] is False
    assert sources["found"]["hardware/mem_ecc_uncorrected"] is True


def test_a_device_level_node_is_never_taken_from_a_core(tmp_path: Path) -> None:
    build(tmp_path, "trn1.2xlarge", "2.30.2.0")
    dev = tmp_path / DEVICES / "neuron0"
    os.rename(dev / "stats/memory_usage", dev / "moved_elsewhere")  # host_mem gone from the device level
    nodes = DeviceNodes(RootFS(tmp_path), "sys/class/neuron_device/neuron0")
    # the cores' own memory_usage/host_mem directories are not the device's
    assert nodes.find(N.HOST_MEM).rel is None
    assert nodes.find(N.HOST_MEM).problem == ""


def test_nodes_are_looked_for_again_after_forget(tmp_path: Path) -> None:
    build(tmp_path, "trn1.2xlarge", "2.30.2.0")
    tree = DriverTree(RootFS(tmp_path))
    assert tree.device_indexes() == (0,)
    assert tree.find(0, N.POWER_UTILIZATION).how == "known:stats"
    dev = tmp_path / DEVICES / "neuron0"
    os.makedirs(dev / "telemetry")
    os.rename(dev / "stats/power", dev / "telemetry/power")
    assert tree.find(0, N.POWER_UTILIZATION).how == "known:stats"  # kept
    tree.forget(0)
    assert tree.find(0, N.POWER_UTILIZATION).rel == "sys/class/neuron_device/neuron0/telemetry/power/utilization"


def test_sources_are_summed_again_when_a_device_left_and_came_back(tmp_path: Path) -> None:
    """The kept summary is keyed by the devices and the lookups made: a device that leaves drops its kept nodes,
    which is a change too, so a summary asked for after it came back (before any new lookup) is not the old one."""
    build(tmp_path, "trn1.2xlarge", "2.30.2.0")
    tree = DriverTree(RootFS(tmp_path))
    assert tree.device_indexes() == (0,)
    assert tree.find(0, N.POWER_UTILIZATION).how == "known:stats"
    assert tree.sources((0,))["found"] == {N.POWER_UTILIZATION.family: True}
    places = [tmp_path / rel / "neuron0" for rel in ("sys/class/neuron_device", DEVICES)]
    for n, place in enumerate(places):
        os.rename(place, tmp_path / f"away{n}")
    tree.forget_listing()
    assert tree.device_indexes() == ()
    for n, place in enumerate(places):
        os.rename(tmp_path / f"away{n}", place)
    tree.forget_listing()
    assert tree.device_indexes() == (0,)
    assert tree.sources((0,)) == {"layout": "none", "found": {}}  # nothing looked up on it since it came back


def test_search_counts_the_cores_wherever_they_are(tmp_path: Path) -> None:
    build(tmp_path, "trn2.48xlarge", "2.30.2.0", CORES_MOVED)
    result = search(RootFS(tmp_path), "sys/class/neuron_device/neuron0")
    assert result.cores == set(range(8)) and not result.stopped
    assert DriverTree(RootFS(tmp_path)).phys_cores(0) == 8


def test_report_sources_read_through_the_schema(tmp_path: Path) -> None:
    report = {
        "system_data": {},
        "neuron_monitor": {
            "driver_version": "2.31.7.0",
            "sources": {
                "neuron_hw_counters": {
                    "layout": "discovered",
                    "found": {"hardware/mem_ecc_uncorrected": True, "hardware/mem_ecc_corrected": False},
                },
                "neuron_device_health": {"layout": "none", "found": {"power/utilization": "yes"}},
            },
        },
    }
    src = read_report(report).sources
    assert src is not None and src.driver_version == "2.31.7.0"
    assert src.groups["neuron_hw_counters"].layout == "discovered"
    assert src.groups["neuron_hw_counters"].missing == ["hardware/mem_ecc_corrected"]
    assert src.groups["neuron_device_health"].found == {}  # a wrong-typed value is left out, and recorded
    assert src.problems
    assert read_report({"system_data": {}}).sources is None


def test_layouts_fixture_names(tmp_path: Path) -> None:
    assert set(LAYOUTS) == {"today", "cores_moved", "regrouped"}
