"""The 1 s design property of the health watch, on the scheduler's own stepped clock (no wall time): with a plain
``{"period": "5s"}`` configuration, a fault written into the driver's files is in a report at most one watch
interval (0.5 s) later, as an extra report between the 5 s ones in which only the health group is fresh; no
count of any group is lost or doubled by the extra reports, and a healthy device never makes one."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from neuron_monitor.daemon.config import plan_from_data
from neuron_monitor.daemon.report import empty_hardware_info, empty_instance_info
from neuron_monitor.daemon.scheduler import Collector, Scheduler
from neuron_monitor.groups.neuron_device_health.collector import WATCH_INTERVAL
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.sim.shapes import get_shape
from neuron_monitor.sim.tree import DeviceTree, write_host_files
from tests.scheduler_fakes import NoApps, StepClock


def _run(root: Path, fault_at: float | None, until: float, fault: Any = None) -> list[tuple[float, dict[str, Any]]]:
    clock = StepClock()
    collector = Collector(
        RootFS(root),
        plan_from_data({"period": "5s"}, "plain.conf"),
        NoApps(),
        lambda: empty_hardware_info("none"),
        lambda: empty_instance_info("off EC2"),
        clock=clock,
    )
    stop = asyncio.Event()
    start = clock.t
    reports: list[tuple[float, dict[str, Any]]] = []
    faulted = False

    async def sleep(delay: float) -> None:
        nonlocal faulted
        step = min(delay, 0.05)  # the fault lands between two wake-ups, wherever they are
        while delay > 0:
            clock.t += step
            delay -= step
            if fault_at is not None and not faulted and clock.t - start >= fault_at:
                fault()
                faulted = True
                fault_time.append(clock.t)
        clock.t += 0.003  # timers fire a little late

    async def write(line: bytes) -> None:
        reports.append((clock.t, orjson.loads(line)))
        clock.t += 0.002  # collecting and writing take time
        if clock.t - start >= until:
            stop.set()

    fault_time: list[float] = []
    scheduler = Scheduler(collector, write, clock=clock, sleep=sleep)
    asyncio.run(scheduler.run(stop))
    scheduler.close()
    if fault_time:
        reports.insert(0, (fault_time[0], {"fault": True}))
    return reports


def _health(report: dict[str, Any]) -> dict[str, Any]:
    return report["system_data"]["neuron_device_health"]


def test_a_fault_is_reported_within_one_watch_interval_on_a_5s_config(tmp_path: Path) -> None:
    shape = get_shape("trn1.2xlarge")
    write_host_files(tmp_path, shape, "2.30.2.0", shape.lnc)
    dev = DeviceTree(tmp_path, shape, 0, "2.30.2.0")
    assert dev.power is not None and dev.health is not None
    dev.power.write(b"POWER_STATUS_VALID,1789180860,10.00,30.00,20.00\n")
    runs = _run(tmp_path, 7.3, 16.0, lambda: dev.health.write(b"hbm\n") if dev.health else None)
    (fault_t, _), reports = runs[0], runs[1:]
    first = next((t, r) for t, r in reports if _health(r)["node"]["state"] == "unhealthy")
    t, report = first
    assert fault_t < t <= fault_t + WATCH_INTERVAL + 0.02  # the design property: within one watch interval
    assert report["system_data"]["neuron_device_health"]["fresh"] is True
    assert report["system_data"]["vcpu_usage"]["fresh"] is False  # an extra report: the rest carried over
    grid = [t for t, r in reports if r["system_data"]["vcpu_usage"]["fresh"]]
    assert len(grid) >= 3 and all(abs((g - 1000.0) % 5.0) < 0.1 or abs((g - 1000.0) % 5.0) > 4.9 for g in grid)
    events = [_health(r)["neuron_devices"][0]["fault_events"] for _, r in reports]
    assert sum(e.get("health_component", {}).get("count", 0) for e in events) == 1  # counted once
    dev.close()


def test_a_healthy_device_makes_no_extra_report(tmp_path: Path) -> None:
    shape = get_shape("trn1.2xlarge")
    write_host_files(tmp_path, shape, "2.30.2.0", shape.lnc)
    dev = DeviceTree(tmp_path, shape, 0, "2.30.2.0")
    assert dev.power is not None
    dev.power.write(b"POWER_STATUS_VALID,1789180860,10.00,30.00,20.00\n")
    reports = _run(tmp_path, None, 60.0)
    assert len(reports) == 12  # the 5 s grid only
    assert all(_health(r)["node"]["state"] == "healthy" for _, r in reports)
    dev.close()


def test_a_reload_keeps_the_group_its_baselines_and_pending_events(tmp_path: Path) -> None:
    """Exactly once across reloads: events seen before a reload that keeps the group reach the next report once."""
    shape = get_shape("trn1.2xlarge")
    write_host_files(tmp_path, shape, "2.30.2.0", shape.lnc)
    dev = DeviceTree(tmp_path, shape, 0, "2.30.2.0")
    assert dev.power is not None
    dev.power.write(b"POWER_STATUS_VALID,1789180860,10.00,30.00,20.00\n")
    clock = StepClock()
    collector = Collector(
        RootFS(tmp_path),
        plan_from_data({"system_metrics": [{"type": "neuron_device_health", "period": "5s"}]}, "a.conf"),
        NoApps(),
        lambda: empty_hardware_info("none"),
        lambda: empty_instance_info("off EC2"),
        clock=clock,
    )
    collector.prime()
    group = collector.groups.system["neuron_device_health"]
    dev.ecc["mem_ecc_uncorrected"].write(b"2\n")
    clock.t += 0.6
    assert collector.due_units(clock.t)  # the watch saw it: the group is due at once
    collector.apply_plan(plan_from_data({"system_metrics": [{"type": "neuron_device_health", "period": "2s"}]}, "b"))
    assert collector.groups.system["neuron_device_health"] is group  # kept, with its ledger
    counts = []
    for _ in range(3):
        body = group.collect()
        counts.append(body["neuron_devices"][0]["fault_events"].get("ecc_uncorrected", {}).get("count", 0))
    assert counts == [2, 0, 0]
    dev.close()
