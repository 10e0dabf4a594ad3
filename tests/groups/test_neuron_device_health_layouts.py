"""neuron_device_health never says healthy blind: on layouts the driver reorganized it reaches the same verdicts as
on today's; where an expected signal is not found the device is ``unknown`` naming it (rule ``signal_missing``),
the node follows, and ``neuron-monitor-health`` exits 2 with that reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.groups.neuron_device_health import body as K
from neuron_monitor.groups.neuron_device_health.collector import NeuronDeviceHealth
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.sim.tree import DeviceTree
from tests.conftest import REPO, SIM_LAYOUTS
from tests.neuron.layouts import DEVICES, LAYOUTS, build

VALID = b"POWER_STATUS_VALID,1789180860,10.00,30.00,20.00\n"


def _host(
    root: Path, moves: dict[str, str], shape: str = "trn2.48xlarge", driver: str = "2.30.2.0"
) -> list[DeviceTree]:
    devs = build(root, shape, driver, moves)
    for d in devs:
        if d.power is not None:
            d.power.write(VALID)
    return devs


def verdicts(body: dict[str, Any]) -> dict[int, tuple[str, list[tuple[str, str]]]]:
    return {
        d[K.DEVICE_INDEX]: (d[K.HEALTH][K.STATE], [(r["rule"], r["detail"]) for r in d[K.HEALTH][K.REASONS]])
        for d in body[K.NEURON_DEVICES]
    }


@pytest.mark.parametrize("layout", [*sorted(LAYOUTS), *(d for d in SIM_LAYOUTS if d[0].isalpha())])
def test_same_verdicts_on_every_layout(tmp_path: Path, layout: str) -> None:
    """Our own moved layouts (tests/neuron/layouts.py) and the simulator's (``--driver moved-cores``, ...)."""
    a = _host(tmp_path / "today", {})
    moves, driver = (LAYOUTS[layout], "2.30.2.0") if layout in LAYOUTS else ({}, layout)
    b = _host(tmp_path / layout, moves, driver=driver)
    ga, gb = (NeuronDeviceHealth(RootFS(tmp_path / n), clock=lambda: 1000.0) for n in ("today", layout))
    ga.prime()
    gb.prime()
    assert verdicts(gb.collect()) == verdicts(ga.collect())
    assert all(state == "healthy" for state, _ in verdicts(gb.collect()).values())
    for devs in (a, b):
        devs[3].ecc["mem_ecc_uncorrected"].write(b"2\n")
        assert devs[5].health is not None
        devs[5].health.write(b"hbm\n")
        devs[7].power.write(b"POWER_STATUS_NO_DATA,0,0.00,0.00,0.00\n")  # type: ignore[union-attr]
    va, vb = verdicts(ga.collect()), verdicts(gb.collect())
    assert vb == va
    assert vb[3] == ("unhealthy", [("ecc_uncorrected", "hbm")])
    assert vb[5] == ("unhealthy", [("unhealthy_component", "hbm")])
    assert vb[7] == ("unknown", [("power_status", "NO_DATA")])
    expected = "known:stats" if layout in ("today", "cores_moved", "moved-cores") else "discovered"
    assert gb.sources()["layout"] == expected
    assert all(gb.sources()["found"].values())


def _remove_ecc_and_health(root: Path, device: int) -> None:
    stats = root / DEVICES / f"neuron{device}" / "stats"
    for name in ("mem_ecc_uncorrected", "sram_ecc_uncorrected", "health_status/unhealthy_components"):
        (stats / "hardware" / name).unlink()


def test_missing_ecc_and_health_nodes_make_the_device_unknown(tmp_path: Path) -> None:
    _host(tmp_path, {})
    _remove_ecc_and_health(tmp_path, 4)
    g = NeuronDeviceHealth(RootFS(tmp_path), clock=lambda: 1000.0)
    body = g.collect()
    got = verdicts(body)
    assert got[4] == (
        "unknown",
        [
            ("signal_missing", "hardware/mem_ecc_uncorrected"),
            ("signal_missing", "hardware/sram_ecc_uncorrected"),
            ("signal_missing", "health_status/unhealthy_components"),
        ],
    )
    assert all(got[d] == ("healthy", []) for d in got if d != 4)
    assert body[K.NODE][K.STATE] == "unknown"
    assert g.sources()["found"]["hardware/mem_ecc_uncorrected"] is False
    assert g.sources()["found"]["health_status/hw_error_event"] is True


def test_a_driver_that_moved_everything_where_it_cannot_be_found_is_never_healthy(tmp_path: Path) -> None:
    _host(tmp_path, {"stats/hardware": "stats/hw_v2", "stats/power": "stats/pwr"})  # defining parents renamed
    g = NeuronDeviceHealth(RootFS(tmp_path), clock=lambda: 1000.0)
    body = g.collect()
    assert body[K.NODE][K.STATE] == "unknown"
    for state, reasons in verdicts(body).values():
        assert state == "unknown"
        assert ("signal_missing", "power/utilization") in reasons
        assert ("signal_missing", "hardware/mem_ecc_uncorrected") in reasons


def test_duplicate_candidates_are_named_and_unknown(tmp_path: Path) -> None:
    _host(tmp_path, LAYOUTS["regrouped"])
    extra = tmp_path / DEVICES / "neuron2" / "stats" / "old" / "hardware"
    os.makedirs(extra)
    (extra / "mem_ecc_uncorrected").write_bytes(b"0\n")
    body = NeuronDeviceHealth(RootFS(tmp_path), clock=lambda: 1000.0).collect()
    dev = next(d for d in body[K.NEURON_DEVICES] if d[K.DEVICE_INDEX] == 2)
    assert dev[K.HEALTH][K.STATE] == "unknown"
    (reason,) = dev[K.HEALTH][K.REASONS]
    assert reason["rule"] == "signal_missing" and reason["detail"] == "hardware/mem_ecc_uncorrected"
    assert "2 candidates" in reason["message"]


@pytest.mark.parametrize(("shape", "driver"), [("trn1.32xlarge", "2.24.7.0"), ("inf1.6xlarge", "2.24.7.0")])
def test_older_drivers_and_inf1_expose_less_and_that_is_no_finding(tmp_path: Path, shape: str, driver: str) -> None:
    _host(tmp_path, {}, shape, driver)
    body = NeuronDeviceHealth(RootFS(tmp_path), clock=lambda: 1000.0).collect()
    assert body[K.NODE][K.STATE] == "healthy"


def test_health_cli_exits_2_naming_the_missing_nodes(tmp_path: Path) -> None:
    _host(tmp_path, {})
    _remove_ecc_and_health(tmp_path, 4)
    cmd = [sys.executable, "-m", "neuron_monitor.health.cli", "--root", str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "hardware/mem_ecc_uncorrected" in done.stdout and "health_status/unhealthy_components" in done.stdout
    assert "signal_missing" in done.stdout
