"""neuron_device_telemetry: the driver's file formats (real-format bytes, odd content), the collector on simulated
trees of several driver versions (missing files named in ``error``), and the simulator's faults and ground truth."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from neuron_monitor.groups.neuron_device_telemetry.collector import NeuronDeviceTelemetry
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.telemetry_files import parse_count, parse_power, parse_unhealthy_components
from neuron_monitor.sim.shapes import get_shape
from neuron_monitor.sim.temporary import TemporarySimulator
from neuron_monitor.sim.tree import DeviceTree, write_host_files


# ---- the file formats ------------------------------------------------------------------------------------------
def test_power_valid_no_data_invalid() -> None:
    p = parse_power(b"POWER_STATUS_VALID,1789180860,12.50,40.00,20.25\n")
    assert (p.status, p.sample_time, p.min_percent, p.max_percent, p.avg_percent) == (
        "VALID", 1789180860, 12.5, 40.0, 20.25,
    )  # fmt: skip
    idle = parse_power(b"POWER_STATUS_VALID,1789180860,0.00,0.00,0.00\n")  # idle trn1 reads all zeros: real zeros
    assert idle.avg_percent == 0.0
    for status in ("NO_DATA", "INVALID"):
        p = parse_power(f"POWER_STATUS_{status},1789180920,0.00,0.00,0.00\n".encode())
        assert p.status == status and p.avg_percent is None and p.min_percent is None  # not zeros


@pytest.mark.parametrize(
    "raw",
    [b"", b"\n", b"POWER_STATUS_VALID,1,2,3\n", b"POWER_STATUS_BOGUS,1,0.00,0.00,0.00\n",
     b"POWER_STATUS_VALID,x,0.00,0.00,0.00\n", b"POWER_STATUS_VALID,1,nan,0.00,0.00\n",
     b"POWER_STATUS_VALID,1,0.00,101.00,0.00\n", b"\xff\xfe garbage"],
)  # fmt: skip
def test_power_odd_content_is_an_error(raw: bytes) -> None:
    with pytest.raises(ValueError):
        parse_power(raw)


def test_unhealthy_components() -> None:
    assert parse_unhealthy_components(b"\n") == []
    assert parse_unhealthy_components(b"hbm,link_efa\n") == ["hbm", "link_efa"]
    assert parse_unhealthy_components(b"hbm, sram,hbm\n") == ["hbm", "sram"]
    assert parse_unhealthy_components(b"device_unreachable\n") == ["device_unreachable"]
    for odd in (b"HBM!\n", b"a" * 100 + b"\n", b",".join([b"x"] * 40)):
        with pytest.raises(ValueError):
            parse_unhealthy_components(odd)


def test_count() -> None:
    assert parse_count(b"18446744073709551615\n") == 2**64 - 1
    for odd in (b"", b"-1\n", b"1.5\n", b"abc"):
        with pytest.raises(ValueError):
            parse_count(odd)


# ---- the collector on built trees -----------------------------------------------------------------------------
def build(root: Path, shape_name: str, driver: str) -> list[DeviceTree]:
    shape = get_shape(shape_name)
    write_host_files(root, shape, driver, shape.lnc)
    return [DeviceTree(root, shape, i, driver) for i in range(shape.devices)]


def test_current_driver_reports_everything(tmp_path: Path, sim_driver: str) -> None:
    """On today's layout and on each layout the simulator imitates (the readers discover them)."""
    devs = build(tmp_path, "trn2.48xlarge", sim_driver)
    g = NeuronDeviceTelemetry(RootFS(tmp_path))
    devs[3].ecc["mem_ecc_repairable_uncorrected"].write(b"7\n")  # history before the start: not reported
    devs[3].core_files[5]["status/timeout"].write(b"2\n")
    g.prime()
    devs[3].ecc["mem_ecc_repairable_uncorrected"].write(b"9\n")
    devs[3].core_files[5]["status/timeout"].write(b"6\n")
    assert devs[3].health is not None and devs[3].power is not None
    devs[3].health.write(b"hbm,link_efa\n")
    devs[3].power.write(b"POWER_STATUS_NO_DATA,1789180920,0.00,0.00,0.00\n")
    devs[3].host_mem["tensors"][0].write(b"4096\n")
    devs[3].core_mem[4]["tensors"][0].write(b"100\n")
    devs[3].core_mem[5]["tensors"][0].write(b"23\n")
    devs[3].core_mem[5]["tensors"][1].write(b"50\n")
    body = g.collect()
    assert "error" not in body, body.get("error")
    d3 = body["neuron_devices"][3]
    assert d3["healthy"] is False and d3["unhealthy_components"] == ["hbm", "link_efa"]
    assert d3["power"] == {"status": "NO_DATA", "sample_time": 1789180920}
    assert d3["ecc"] == {"mem_ecc_repairable_uncorrected": 2}
    assert d3["host_memory"]["tensors"] == {"used_bytes": 4096, "peak_bytes": 0}
    assert d3["device_memory"]["tensors"] == {"used_bytes": 123, "peak_bytes": 50}
    assert len(d3["device_memory"]) == 11 and len(d3["host_memory"]) == 8
    core = d3["neuroncores"][str(3 * 4 + 2)]  # LNC 2: physical cores 4 and 5 are logical core 2 of the device
    assert core["device_memory"]["tensors"] == {"used_bytes": 123, "peak_bytes": 50}
    assert core["execution_status"]["timeout"] == 4
    assert core["busy_ratio"] == 0.0
    d0 = body["neuron_devices"][0]
    assert d0["healthy"] is True and d0["unhealthy_components"] == []
    again = g.collect()["neuron_devices"][3]
    assert again["ecc"]["mem_ecc_repairable_uncorrected"] == 0  # counted once
    assert again["neuroncores"]["14"]["execution_status"]["timeout"] == 0
    devs[3].ecc["mem_ecc_repairable_uncorrected"].write(b"1\n")  # went back from 9: a reset, not a wrap
    assert g.collect()["neuron_devices"][3]["ecc"]["mem_ecc_repairable_uncorrected"] == 1
    g.close()
    for d in devs:
        d.close()


def test_old_drivers_say_what_is_missing(tmp_path: Path) -> None:
    build(tmp_path / "a", "trn1.32xlarge", "2.24.7.0")
    g = NeuronDeviceTelemetry(RootFS(tmp_path / "a"))
    g.prime()
    time.sleep(0.01)
    body = g.collect()
    err = body["error"]
    assert "health_status/unhealthy_components not exposed by the driver for neuron_device 0-15" in err
    assert "busy_ratio not reported: before driver 2.30.2" in err
    d = body["neuron_devices"][0]
    assert "healthy" not in d and "power" in d and d["ecc"] == {"mem_ecc_repairable_uncorrected": 0}
    assert all("busy_ratio" not in c for c in d["neuroncores"].values())
    build(tmp_path / "b", "trn1.2xlarge", "2.7.33.0")  # the old metrics/ layout, before power and categories
    body = NeuronDeviceTelemetry(RootFS(tmp_path / "b")).collect()
    assert "power/utilization not exposed by the driver for neuron_device 0" in body["error"]
    assert "memory_usage/device_mem/<category> not exposed" in body["error"]
    assert "execution_status" in body["neuron_devices"][0]["neuroncores"]["0"]  # found under metrics/


def test_a_missing_file_is_named_and_the_rest_reported(tmp_path: Path) -> None:
    devs = build(tmp_path, "trn1.32xlarge", "2.30.2.0")
    g = NeuronDeviceTelemetry(RootFS(tmp_path))
    g.prime()
    (devs[2].dir / "stats/power/utilization").unlink()
    devs[4].power.write(b"POWER_STATUS_WHAT,1,0,0,0\n")  # type: ignore[union-attr]
    body = g.collect()
    assert "power/utilization of neuron_device 2" in body["error"]
    assert "power/utilization of neuron_device 4: unknown power status" in body["error"]
    assert len(body["neuron_devices"]) == 16 and "power" in body["neuron_devices"][3]
    body = g.collect()  # the files were looked for again
    assert "power/utilization not exposed by the driver for neuron_device 2" in body["error"]


def test_no_driver(tmp_path: Path) -> None:
    from neuron_monitor.util.errors import GroupError

    with pytest.raises(GroupError):
        NeuronDeviceTelemetry(RootFS(tmp_path)).collect()


# ---- the simulator's faults and ground truth -------------------------------------------------------------------
def test_simulator_faults_and_busy_ratio_against_ground_truth() -> None:
    with TemporarySimulator("trn1.2xlarge", runtimes=2, sysfs_interval=0.05, ecc_rate=0, utilization=0.3) as sim:
        g = NeuronDeviceTelemetry(RootFS(sim.root))
        g.prime()
        sim.command("busy_without_runtime", device=0, core=1, utilization=0.4)
        sim.command("unhealthy", device=0, component="hbm")
        sim.command("ecc_repairable", device=0, count=5)
        sim.command("power_no_data", device=0)
        deadline = time.monotonic() + 60
        seen: dict[str, object] = {}
        repairable = 0
        while time.monotonic() < deadline:
            d = g.collect()["neuron_devices"][0]
            repairable += d["ecc"]["mem_ecc_repairable_uncorrected"]
            seen.update(healthy=d["healthy"], comps=d["unhealthy_components"], power=d["power"]["status"])
            if repairable == 5 and seen["power"] == "NO_DATA" and seen["healthy"] is False:
                break
            time.sleep(0.1)
        assert (repairable, seen["comps"], seen["power"]) == (5, ["hbm"], "NO_DATA")
        sim.command("healthy", device=0)
        deadline = time.monotonic() + 60
        while g.collect()["neuron_devices"][0]["healthy"] is False and time.monotonic() < deadline:
            time.sleep(0.1)
        assert g.collect()["neuron_devices"][0]["unhealthy_components"] == []
        # busy ratio: the group's per-period ratios, integrated over 10 s, against what the simulator animates:
        # core 0 runs one runtime at 0.3, core 1 the other at 0.3 plus a process without a data block at 0.4
        g.collect()
        t0 = last = time.monotonic()
        integrated: dict[str, float] = {}
        while last - t0 < 10:
            time.sleep(0.5)
            body = g.collect()
            now = time.monotonic()
            for core, c in body["neuron_devices"][0]["neuroncores"].items():
                integrated[core] = integrated.get(core, 0.0) + c["busy_ratio"] * (now - last)
            last = now
        window = last - t0
        lag = 0.2 / window  # the simulator rewrites the files every 0.05 s; a loaded machine delays a step or two
        assert abs(integrated["0"] / window - 0.3) < 0.01 + lag, integrated
        assert abs(integrated["1"] / window - 0.7) < 0.01 + lag, integrated
