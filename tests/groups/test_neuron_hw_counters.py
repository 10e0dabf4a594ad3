"""neuron_hw_counters on simulated sysfs trees: per-period deltas, 16-bit wrap, missing files, vanishing devices."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_monitor.groups.neuron_hw_counters.collector import COUNTERS, NeuronHwCounters
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.sim.shapes import get_shape
from neuron_monitor.sim.tree import DeviceTree, write_host_files


def build(root: Path, shape_name: str, driver: str) -> list[DeviceTree]:
    shape = get_shape(shape_name)
    write_host_files(root, shape, driver, shape.lnc)
    return [DeviceTree(root, shape, i, driver) for i in range(shape.devices)]


def test_deltas_per_period_and_wrap(tmp_path: Path, sim_driver: str) -> None:
    devs = build(tmp_path, "inf2.24xlarge", sim_driver)  # today's layout and each one the simulator imitates
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
    assert all("mem_ecc_corrected" not in d and d["mem_ecc_uncorrected"] == 0 for d in body["neuron_devices"])
    assert g.collect()["neuron_devices"][0] == {  # the quiet body (nothing changed) leaves it out as well
        "neuron_device_index": 0,
        "mem_ecc_uncorrected": 0,
        "sram_ecc_uncorrected": 0,
    }
    build(tmp_path / "inf1", "inf1.6xlarge", "2.24.7.0")
    body = NeuronHwCounters(RootFS(tmp_path / "inf1")).collect()
    # a counter that could not be read is left out, never reported as 0
    assert all(d == {"neuron_device_index": d["neuron_device_index"]} for d in body["neuron_devices"])
    assert "mem_ecc_uncorrected not exposed by the driver for neuron_device 0-3" in body["error"]


def test_no_driver_and_vanishing_device(tmp_path: Path) -> None:
    import shutil

    import pytest

    from neuron_monitor.util.errors import GroupError

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


class CarefulOnly(NeuronHwCounters):
    """The group with its one-pass read disabled: every collection takes the careful per-file path."""

    def _plan(self, devices: tuple[int, ...], errors: list[str]) -> None:
        return None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(
        st.tuples(
            st.integers(0, 5),  # device
            st.sampled_from(COUNTERS),
            st.one_of(
                st.integers(0, 70000).map(lambda v: b"%d\n" % v),
                st.sampled_from([b"", b"\n", b"garbage\n", b"1" * 80 + b"\n", b" 7 \n"]),
                st.none(),  # nothing written: a quiet collection
            ),
        ),
        max_size=30,
    ),
    remove=st.one_of(st.none(), st.integers(0, 29)),
)
def test_one_pass_read_reports_what_the_careful_path_does(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[int, str, bytes | None]], remove: int | None
) -> None:
    root = tmp_path_factory.mktemp("hw")
    devs = build(root, "inf2.24xlarge", "2.30.2.0")
    fast, careful = NeuronHwCounters(RootFS(root)), CarefulOnly(RootFS(root))
    fast.prime()
    careful.prime()
    for i, (device, name, content) in enumerate(steps):
        if i == remove and devs[5].dir.exists():  # the last device goes away mid-run
            shutil.rmtree(devs[5].dir)
            (root / "sys/class/neuron_device/neuron5").unlink()
        if content is not None and (device != 5 or devs[5].dir.exists()):
            devs[device].ecc[name].write(content)
        assert fast.collect() == careful.collect()
    fast.close()
    careful.close()
    for d in devs:
        d.close()


def test_steady_files_are_read_in_one_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    devs = build(tmp_path, "trn1.32xlarge", "2.30.2.0")
    g = NeuronHwCounters(RootFS(tmp_path))
    careful = []
    real = g._read_careful
    monkeypatch.setattr(g, "_read_careful", lambda devices: careful.append(devices) or real(devices))
    g.prime()
    for _ in range(3):
        body = g.collect()
        assert all(d[name] == 0 for d in body["neuron_devices"] for name in COUNTERS)
    quiet = g.collect()
    assert g.collect() is quiet  # nothing changed: the same all-zero body, nothing converted
    devs[7].ecc["sram_ecc_uncorrected"].write(b"4\n")
    assert g.collect()["neuron_devices"][7]["sram_ecc_uncorrected"] == 4
    assert g.collect() is quiet and quiet["neuron_devices"][7]["sram_ecc_uncorrected"] == 0  # counted once
    assert len(careful) == 1  # only the first read: the rest went through the one-pass read
    devs[7].ecc["sram_ecc_uncorrected"].write(b"\n")  # odd content: the careful path takes over
    g.collect()
    assert len(careful) == 2
    g.close()
    for d in devs:
        d.close()


def test_unread_counters_serve_nothing_not_zero() -> None:
    """A device whose counters could not be read: no Prometheus sample, no CloudWatch datum nor total, '-' in top."""
    from neuron_monitor.groups.neuron_hw_counters import spec as S
    from neuron_monitor.schema.values import Problems

    body = {
        "neuron_devices": [
            {"neuron_device_index": 0, "mem_ecc_uncorrected": 0, "sram_ecc_uncorrected": 1},
            {"neuron_device_index": 1},  # nothing read
            {"neuron_device_index": 2, "sram_ecc_uncorrected": 0, "mem_ecc_corrected": 0},  # mem uncorrected unread
            {"neuron_device_index": 3, "sram_ecc_uncorrected": 0, "mem_ecc_corrected": 2},  # ... with events beside
        ],
        "error": "mem_ecc_uncorrected not exposed by the driver for neuron_device 1",
    }
    value = S.read(body, "neuron_hw_counters", Problems())
    counts = {c[1]: c[2] for c in S.counts(value, 1.0)}
    assert counts[("0",)] == {"mem_ecc_uncorrected": 0, "sram_ecc_uncorrected": 1} and counts[("1",)] == {}
    datums = [(d[1], d[2], d[3]) for d in S.datums(value, 1.0, False)]
    assert [d for d in datums if d[0] == ("1",)] == []
    assert (("0",), "", 1) in datums
    cells = {c[1]: c[2] for c in S.top(value, 1.0)}
    assert cells[("1",)] == "-" and cells[("0",)] == "1"
    assert cells[("2",)] == "-"  # an unread uncorrected count is never shown as 0
    assert cells[("3",)] == "2"  # what was counted is still shown
