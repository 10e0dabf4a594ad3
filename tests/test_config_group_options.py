"""Group options from the command line reach the group through the configuration plan (no class attribute)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from neuron_monitor.daemon.cli import build_parser, load_daemon_plan
from neuron_monitor.daemon.collection.groups import GroupSet
from neuron_monitor.daemon.config import plan_from_data
from neuron_monitor.groups.neuron_device_health.collector import WATCH_INTERVAL, NeuronDeviceHealth
from neuron_monitor.host.rootfs import RootFS

HEALTH = {"system_metrics": [{"type": "neuron_device_health", "period": "5s"}]}


def _conf(tmp_path: Path) -> str:
    path = tmp_path / "monitor.conf"
    path.write_text('{"system_metrics": [{"type": "neuron_device_health", "period": "5s"}]}')
    return str(path)


def test_state_dir_and_watch_interval_ride_the_plan_to_the_group(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["-c", _conf(tmp_path), "--state-dir", str(tmp_path / "state"), "--health-watch-interval", "0.25"]
    )
    plan, _ = load_daemon_plan(args)
    assert plan.options_of("neuron_device_health") == {"state_dir": str(tmp_path / "state"), "watch_interval": 0.25}
    groups = GroupSet(RootFS(tmp_path))
    groups.apply(plan)
    health = groups.system["neuron_device_health"]
    assert isinstance(health, NeuronDeviceHealth)
    assert (health.state_dir, health.watch_interval) == (str(tmp_path / "state"), 0.25)
    groups.close()


def test_without_the_flags_the_group_keeps_its_defaults_and_no_other_instance_is_touched(tmp_path: Path) -> None:
    plan, _ = load_daemon_plan(build_parser().parse_args(["-c", _conf(tmp_path)]))
    assert plan.options_of("neuron_device_health") == {}
    configured = GroupSet(RootFS(tmp_path))
    configured.apply(load_daemon_plan(build_parser().parse_args(["-c", _conf(tmp_path), "--state-dir", "/x"]))[0])
    plain = GroupSet(RootFS(tmp_path))
    plain.apply(plan)
    health = plain.system["neuron_device_health"]
    assert isinstance(health, NeuronDeviceHealth)
    assert (health.state_dir, health.watch_interval) == (None, WATCH_INTERVAL)
    configured.close()
    plain.close()


def test_a_change_of_options_is_a_change_of_plan() -> None:
    plan = plan_from_data(HEALTH, "a.conf")
    other = plan_from_data(HEALTH, "a.conf")
    assert plan.same_as(other)
    assert not plan.same_as(dataclasses.replace(other, group_options={"neuron_device_health": {"state_dir": "/s"}}))
