"""neuron_device_health on built trees: each rule fires from the driver's files and clears when they clear, the
watch answers True only when a report should go out, fault events are carried once, the state file across a
restart, and the body reads back through the spec."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.groups.neuron_device_health import body as K
from neuron_monitor.groups.neuron_device_health import spec as health_spec
from neuron_monitor.groups.neuron_device_health.collector import NeuronDeviceHealth
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.schema.values import Problems
from neuron_monitor.sim.shapes import get_shape
from neuron_monitor.sim.tree import DeviceTree, write_host_files

VALID = b"POWER_STATUS_VALID,1789180860,10.00,30.00,20.00\n"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def build(root: Path, shape_name: str = "trn2.48xlarge", driver: str = "2.30.2.0") -> list[DeviceTree]:
    shape = get_shape(shape_name)
    write_host_files(root, shape, driver, shape.lnc)
    devs = [DeviceTree(root, shape, i, driver) for i in range(shape.devices)]
    for d in devs:
        if d.power is not None:
            d.power.write(VALID)
    return devs


def health(body: dict[str, Any], device: int) -> dict[str, Any]:
    entry = next(d for d in body[K.NEURON_DEVICES] if d[K.DEVICE_INDEX] == device)
    return entry


def reasons(body: dict[str, Any], device: int) -> list[tuple[str, str]]:
    return [(r["rule"], r["detail"]) for r in health(body, device)[K.HEALTH][K.REASONS]]


@pytest.fixture
def trn2(tmp_path: Path, sim_driver: str) -> tuple[list[DeviceTree], NeuronDeviceHealth, Clock]:
    """A trn2.48xlarge on today's layout and on each layout the simulator imitates (the readers discover them)."""
    devs = build(tmp_path, driver=sim_driver)
    clock = Clock()
    g = NeuronDeviceHealth(RootFS(tmp_path), clock=clock)
    g.prime()
    return devs, g, clock


def test_healthy_node(trn2: tuple[list[DeviceTree], NeuronDeviceHealth, Clock]) -> None:
    _, g, _ = trn2
    body = g.collect()
    assert "error" not in body
    assert body[K.NODE][K.STATE] == "healthy"
    assert body[K.NODE][K.DEVICE_STATES] == {"healthy": 16, "unhealthy": 0, "unknown": 0}
    assert body[K.NODE][K.INSTANCE_TYPE] == "trn2.48xlarge" and body[K.NODE][K.EXPECTED_DEVICES] == 16
    assert all(d[K.HEALTH][K.STATE] == "healthy" for d in body[K.NEURON_DEVICES])
    assert not g.watch()  # nothing changed: no early report


@pytest.mark.parametrize(
    ("fault", "clear", "state", "found", "kind"),
    [
        ("ecc:mem_ecc_uncorrected=3", "ecc:mem_ecc_uncorrected=0", "unhealthy", ("ecc_uncorrected", "hbm"),
         "ecc_uncorrected"),
        ("ecc:sram_ecc_uncorrected=1", "ecc:sram_ecc_uncorrected=0", "unhealthy", ("ecc_uncorrected", "sram"),
         "ecc_uncorrected"),
        ("ecc:mem_ecc_repairable_uncorrected=2", "ecc:mem_ecc_repairable_uncorrected=0", "healthy",
         ("repair_pending", "hbm"), "ecc_repairable"),
        ("health:hbm", "health:", "unhealthy", ("unhealthy_component", "hbm"), "health_component"),
        ("hw:1", "hw:0", "unhealthy", ("hw_error_event", ""), "hw_error"),
        ("health:device_unreachable", "health:", "unknown", ("device_unreachable", ""), None),
        ("power:NO_DATA", "power:VALID", "unknown", ("power_status", "NO_DATA"), None),
        ("power:INVALID", "power:VALID", "unknown", ("power_status", "INVALID"), None),
        ("hw:garbage", "hw:0", "unknown", ("signal_unreadable", "hw_error_event"), None),
    ],
)  # fmt: skip
def test_each_rule_fires_and_clears(
    trn2: tuple[list[DeviceTree], NeuronDeviceHealth, Clock],
    fault: str,
    clear: str,
    state: str,
    found: tuple[str, str],
    kind: str | None,
) -> None:
    devs, g, clock = trn2
    g.collect()

    def apply(spec: str) -> None:
        what, _, value = spec.partition(":")
        d = devs[5]
        if what == "ecc":
            name, _, n = value.partition("=")
            d.ecc[name].write(f"{n}\n".encode())
        elif what == "health":
            assert d.health is not None
            d.health.write(f"{value}\n".encode())
        elif what == "hw":
            (hw_event,) = d.dir.rglob("hw_error_event")  # wherever the simulated layout puts it
            hw_event.write_text(f"{value}\n")
        else:
            assert d.power is not None
            d.power.write(f"POWER_STATUS_{value},1789180920,0.00,0.00,0.00\n".encode())

    clock.t = 1010.0
    apply(fault)
    assert g.watch()  # the watch asks for a report at once
    clock.t = 1010.1
    body = g.collect()
    assert health(body, 5)[K.HEALTH][K.STATE] == state
    assert found in reasons(body, 5)
    assert health(body, 5)[K.HEALTH][K.SINCE] == (1010.0 if state != "healthy" else 1000.0)
    assert body[K.NODE][K.STATE] == ("healthy" if state == "healthy" else state)
    events = health(body, 5)[K.FAULT_EVENTS]
    if kind is not None:
        assert events[kind][K.COUNT] >= 1 and events[kind][K.FIRST_SEEN] == 1010.0
    assert health(g.collect(), 5)[K.FAULT_EVENTS] == {}  # carried once
    clock.t = 1020.0
    apply(clear)
    assert g.watch()
    body = g.collect()
    assert health(body, 5)[K.HEALTH] == {K.STATE: "healthy", K.SINCE: 1020.0 if state != "healthy" else 1000.0,
                                         K.REASONS: []}  # fmt: skip
    assert body[K.NODE][K.STATE] == "healthy"


def test_removed_device_is_lost(tmp_path: Path) -> None:
    import shutil

    devs = build(tmp_path, "trn1.32xlarge")
    clock = Clock()
    g = NeuronDeviceHealth(RootFS(tmp_path), clock=clock)
    g.prime()
    shutil.rmtree(devs[7].dir)
    (tmp_path / "sys/class/neuron_device/neuron7").unlink()
    assert g.watch()
    body = g.collect()
    assert health(body, 7)[K.HEALTH][K.STATE] == "unhealthy"
    assert reasons(body, 7) == [("device_lost", "")]
    assert health(body, 7)[K.FAULT_EVENTS]["device_lost"][K.COUNT] == 1
    assert body[K.NODE][K.STATE] == "unhealthy" and body[K.NODE][K.DEVICE_STATES]["unhealthy"] == 1
    assert not g.watch()


def test_fewer_devices_than_the_instance_type_has(tmp_path: Path) -> None:
    build(tmp_path, "trn1.2xlarge")  # one device listed
    (tmp_path / "sys/class/dmi/id/product_name").write_text("trn1.32xlarge\n")  # which has 16
    body = NeuronDeviceHealth(RootFS(tmp_path)).collect()
    assert body[K.NODE][K.STATE] == "unhealthy" and body[K.NODE][K.DEVICE_STATES]["unhealthy"] == 15
    assert reasons(body, 15) == [("device_lost", "")] and health(body, 0)[K.HEALTH][K.STATE] == "healthy"
    assert health(body, 15)[K.FAULT_EVENTS] == {}  # missing at the start without a state: a baseline


def test_state_dir_counts_once_across_a_restart(tmp_path: Path) -> None:
    devs = build(tmp_path / "root")
    state = tmp_path / "state"
    devs[2].ecc["mem_ecc_uncorrected"].write(b"1\n")  # before the first run with a state: counted once
    g = NeuronDeviceHealth(RootFS(tmp_path / "root"), state_dir=str(state))
    g.prime()
    assert health(g.collect(), 2)[K.FAULT_EVENTS]["ecc_uncorrected"][K.COUNT] == 1
    g.close()
    saved = json.loads((state / "fault-events.json").read_text())
    assert saved["totals"]["2/ecc_uncorrected"][0] == 1
    devs[2].ecc["mem_ecc_uncorrected"].write(b"3\n")  # while the daemon was down
    g2 = NeuronDeviceHealth(RootFS(tmp_path / "root"), state_dir=str(state))
    g2.prime()
    body = g2.collect()
    assert health(body, 2)[K.FAULT_EVENTS]["ecc_uncorrected"][K.COUNT] == 2
    assert health(body, 2)[K.FAULT_TOTALS]["ecc_uncorrected"][K.COUNT] == 3
    g2.close()
    g3 = NeuronDeviceHealth(RootFS(tmp_path / "root"), state_dir=str(state))
    g3.prime()
    assert health(g3.collect(), 2)[K.FAULT_EVENTS] == {}  # nothing new: nothing counted again
    (state / "fault-events.json").write_text("{not json")
    g4 = NeuronDeviceHealth(RootFS(tmp_path / "root"), state_dir=str(state))
    assert "fault-event state" in g4.collect()["error"]


def test_no_driver_is_unknown(tmp_path: Path) -> None:
    body = NeuronDeviceHealth(RootFS(tmp_path)).collect()
    assert body[K.NODE][K.STATE] == "unknown" and body[K.NEURON_DEVICES] == []


def test_body_reads_back_through_the_spec(trn2: tuple[list[DeviceTree], NeuronDeviceHealth, Clock]) -> None:
    devs, g, clock = trn2
    assert devs[1].health is not None
    devs[1].health.write(b"hbm,link_efa\n")
    clock.t = 1001.0
    g.watch()
    body = json.loads(json.dumps(g.collect()))
    problems = Problems()
    value = health_spec.read(body, "system_data.neuron_device_health", problems)
    assert not problems
    dev1 = value.devices[1]
    assert dev1.state == "unhealthy" and dev1.events == {"health_component": 2.0}
    assert [r.detail for r in dev1.reasons] == ["hbm", "link_efa"]
    assert value.node_state == "unhealthy"
    fams = {f.name: (key, vals) for f, key, vals, _, _ in health_spec.gauges(value) if key == ("1",)}
    assert fams["neuron_device_health_state"][1] == {"healthy": 0.0, "unhealthy": 1.0, "unknown": 0.0}


def test_det_findings_and_top_cells_follow_the_verdict(
    trn2: tuple[list[DeviceTree], NeuronDeviceHealth, Clock],
) -> None:
    devs, g, clock = trn2
    assert devs[1].health is not None and devs[2].power is not None
    devs[1].health.write(b"hbm\n")
    devs[2].power.write(b"POWER_STATUS_INVALID,1789180920,0.00,0.00,0.00\n")
    devs[3].ecc["mem_ecc_repairable_uncorrected"].write(b"1\n")
    clock.t = 1001.0
    g.watch()
    problems = Problems()
    value = health_spec.read(json.loads(json.dumps(g.collect())), "system_data.neuron_device_health", problems)
    found = {(rule.kind, key): (amount, details) for rule, key, amount, details in health_spec.findings(value)}
    assert found[(health_spec.DEVICE_HEALTH_UNHEALTHY, ("1",))] == (1.0, {"reasons": ["unhealthy_component hbm"]})
    assert found[(health_spec.DEVICE_HEALTH_UNHEALTHY, ("0",))] == (0.0, {"reasons": []})
    assert found[(health_spec.DEVICE_HEALTH_UNKNOWN, ("2",))] == (1.0, {"reasons": ["power_status INVALID"]})
    assert found[(health_spec.DEVICE_FAULT_EVENTS, ("1",))] == (1.0, {"health_component": 1.0})
    assert found[(health_spec.DEVICE_FAULT_EVENTS, ("3",))] == (1.0, {"ecc_repairable": 1.0})
    assert found[(health_spec.DEVICE_HEALTH_UNHEALTHY, ("3",))][0] == 0.0  # repair pending: healthy
    cells = {key: (text, style) for _, key, text, style in health_spec.top(value, 5.0)}
    assert cells[("0",)] == ("healthy", "green")
    assert cells[("1",)] == ("UNHEALTHY unhealthy_component hbm", "bold red")
    assert cells[("2",)] == ("unknown power_status INVALID", "yellow")
    assert cells[("3",)] == ("healthy", "green")
    # neuron-monitor-top's device cursor: the verdict with since when, then every reason with severity and message
    details = health_spec.top_device_details(value)
    assert details[0][0].startswith("verdict healthy")
    assert details[1][0].startswith("verdict unhealthy since ")
    assert details[1][1:] == ["unhealthy_component hbm (unhealthy): driver reports hbm unhealthy"]
    assert details[2][0].startswith("verdict unknown") and any("power_status INVALID" in x for x in details[2])
    assert details[3][1:] == ["repair_pending hbm (warning): 1 repairable HBM ECC errors: repair at next device reset"]
