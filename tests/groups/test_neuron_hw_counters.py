"""neuron_hw_counters on simulated sysfs trees: per-period deltas, 16-bit wrap, missing files, vanishing devices."""

from __future__ import annotations

from pathlib import Path

from neuron_monitor.groups.neuron_hw_counters import COUNTERS, NeuronHwCounters
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.sim.shapes import get_shape
from neuron_monitor.sim.tree import DeviceTree, write_host_files


def build(root: Path, shape_name: str, driver: str) -> list[DeviceTree]:
    shape = get_shape(shape_name)
    write_host_files(root, shape, driver, shape.lnc)
    return [DeviceTree(root, shape, i, driver) for i in range(shape.devices)]


def test_deltas_per_period_and_wrap(tmp_path: Path) -> None:
    devs = build(tmp_path, "inf2.24xlarge", "2.30.2.0")
    g = NeuronHwCounters(RootFS(tmp_path))
    devs[2].ecc["mem_ecc_uncorrected"].write(b"5\n")  # history before we started: not reported
    g.prime()
    devs[2].ecc["mem_ecc_uncorrected"].write(b"8\n")
    devs[0].ecc["sram_ecc_corrected"].write(b"1\n")
    body = g.collect()
    assert "error" not in body
    assert [d["neuron_device_index"] for d in body["neuron_devices"]] == list(range(6))
    assert list(body["neuron_devices"][0]) == ["neuron_device_index", *COUNTERS]
    assert body["neuron_devices"][2]["mem_ecc_uncorrected"] == 3
    assert body["neuron_devices"][0]["sram_ecc_corrected"] == 1
    assert g.collect()["neuron_devices"][2]["mem_ecc_uncorrected"] == 0  # counted once
    devs[1].ecc["mem_ecc_corrected"].write(b"65534\n")
    g.collect()
    devs[1].ecc["mem_ecc_corrected"].write(b"2\n")  # the 16-bit firmware field wrapped
    assert g.collect()["neuron_devices"][1]["mem_ecc_corrected"] == 4
    for d in devs:
        d.close()


def test_missing_files_are_reported_not_fatal(tmp_path: Path) -> None:
    build(tmp_path / "old", "trn1.32xlarge", "2.24.7.0")
    g = NeuronHwCounters(RootFS(tmp_path / "old"))
    g.prime()
    body = g.collect()
    assert len(body["neuron_devices"]) == 16
    assert "mem_ecc_corrected not exposed by the driver for neuron_device 0-15" in body["error"]
    assert "mem_ecc_uncorrected" not in body["error"]
    build(tmp_path / "inf1", "inf1.6xlarge", "2.24.7.0")
    body = NeuronHwCounters(RootFS(tmp_path / "inf1")).collect()
    assert all(d["mem_ecc_uncorrected"] == 0 for d in body["neuron_devices"])
    assert "mem_ecc_uncorrected not exposed by the driver for neuron_device 0-3" in body["error"]


def test_no_driver_and_vanishing_device(tmp_path: Path) -> None:
    import shutil

    import pytest

    from neuron_monitor.groups.base import GroupError

    with pytest.raises(GroupError, match="no Neuron devices"):
        NeuronHwCounters(RootFS(tmp_path / "empty")).collect()
    devs = build(tmp_path, "trn1.32xlarge", "2.30.2.0")
    g = NeuronHwCounters(RootFS(tmp_path))
    g.prime()
    shutil.rmtree(devs[3].dir)
    (tmp_path / "sys/class/neuron_device/neuron3").unlink()
    body = g.collect()
    assert [d["neuron_device_index"] for d in body["neuron_devices"]] == [i for i in range(16) if i != 3]
    g.close()
