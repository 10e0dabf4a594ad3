"""A group added as nothing but its folder reaches the simulator: a throwaway ``fan_speed`` group (its spec, a
collector and a simulator part, ``sim.py``) is dropped into the groups package (a temporary directory added to its
path). The simulator builds its files in every device, in each driver layout, steps them on its clock, answers its
fault command by name and puts its share in the ground truth; the real daemon (a process whose groups package has
the folder too) reads the group from that tree, and the Prometheus exporter serves it, with no other change."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_monitor import groups as group_package
from neuron_monitor.schema import read as read_module
from neuron_monitor.schema import spec as spec_module
from neuron_monitor.sim import part as part_module
from neuron_monitor.sim.animator import Simulator, command_kinds
from neuron_monitor.sim.ground_truth import GROUND_TRUTH_FILE, GroundTruth
from neuron_monitor.sim.shapes import get_shape
from tests.exporters.prometheus.prom_helpers import feed, one, parse, scrape
from tests.schema.test_new_group import SPEC_SOURCE

REPO = Path(__file__).resolve().parents[2]

SIM_SOURCE = '''
"""The simulator's part for ``fan_speed``: one fan per Neuron device, ``neuronN/fan/fan1_input`` (RPM) and
``fan1_turns`` (turns since boot); command ``fan_stall`` (``device``) stops a fan."""
from typing import Any

from neuron_monitor.sim.part import Host, SimPart
from neuron_monitor.sim.tree import DeviceTree, ReopenedFile

RPM = 1200


class FanNodes:
    def __init__(self, device: DeviceTree) -> None:
        parent = f"{device.top}/fans" if device.layout.name else device.top  # a reorganized layout moves it
        folder = device.builder.make(f"{parent}/fan")
        self.rpm = ReopenedFile(device.builder.new(f"{folder}/fan1_input"), b"%d\\n" % RPM)
        self.turns = ReopenedFile(device.builder.new(f"{folder}/fan1_turns"), b"0\\n")

    def close(self) -> None:
        pass


class FanPart(SimPart):
    commands = ("fan_stall",)

    def __init__(self, name: str, host: Host) -> None:
        super().__init__(name, host)
        self.rpm = [RPM] * len(host.devices)
        self.turns = [0.0] * len(host.devices)

    @classmethod
    def device_nodes(cls, device: DeviceTree) -> FanNodes:
        return FanNodes(device)

    def step(self, now: float, dt: float) -> None:
        for dev, rpm in enumerate(self.rpm):
            self.turns[dev] += rpm * dt / 60

    def write(self, now: float) -> None:
        for dev in range(len(self.rpm)):
            nodes = self.nodes(dev)
            nodes.rpm.write(b"%d\\n" % self.rpm[dev])
            nodes.turns.write(b"%d\\n" % self.turns[dev])

    def apply(self, kind: str, command: dict[str, Any], detail: dict[str, Any]) -> str:
        dev, error = self.device_of(command, detail)
        if error:
            return error
        self.rpm[dev] = 0
        self.write(0.0)
        return ""

    def totals(self) -> dict[str, Any]:
        return {"fan_rpm": {str(d): rpm for d, rpm in enumerate(self.rpm)}}


PART = FanPart
'''

COLLECTOR_SOURCE = '''
"""System group ``fan_speed``: each Neuron device's fan, found below the device's directory."""
from typing import Any

from neuron_monitor.groups.base import SystemGroup
from neuron_monitor.util.errors import GroupError
from neuron_monitor.neuron.sysfs import DriverTree


class FanSpeed(SystemGroup):
    type_name = "fan_speed"

    def __init__(self, root: Any) -> None:
        super().__init__(root)
        self.tree = DriverTree(root)

    def _find(self, device: int, name: str) -> str:
        for parent in ("", "fans/"):
            rel = f"{self.tree.device_rel(device)}/{parent}fan/{name}"
            if self.root.exists(rel):
                return rel
        raise GroupError(f"no fan of device {device}")

    def collect(self) -> dict[str, Any]:
        rpm, turns = {}, {}
        for device in self.tree.device_indexes():
            rpm[str(device)] = float(self.root.read_text(self._find(device, "fan1_input")))
            turns[str(device)] = float(self.root.read_text(self._find(device, "fan1_turns")))
        return {"rpm": rpm, "turns": turns}


GROUP = FanSpeed
'''

CONFIG = {"period": "1s", "system_metrics": [{"type": "fan_speed"}]}


def _reset() -> None:
    spec_module.registry.cache_clear()
    spec_module._counter_families.cache_clear()
    read_module._registry = None
    part_module.parts.cache_clear()


@pytest.fixture
def fan_group(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "groups"
    group = folder / "fan_speed"
    group.mkdir(parents=True)
    (group / "__init__.py").write_text("")
    (group / "spec.py").write_text(SPEC_SOURCE)
    (group / "sim.py").write_text(SIM_SOURCE)
    (group / "collector.py").write_text(COLLECTOR_SOURCE)
    group_package.__path__.append(str(folder))
    _reset()
    try:
        yield folder
    finally:
        group_package.__path__.remove(str(folder))
        for name in ("spec", "sim", "collector", ""):
            sys.modules.pop(f"neuron_monitor.groups.fan_speed{'.' + name if name else ''}", None)
        _reset()


@pytest.mark.parametrize("driver", ["2.30.2.0", "moved-cores", "regrouped"])
def test_a_sim_module_alone_brings_a_group_to_the_simulator(fan_group: Path, tmp_path: Path, driver: str) -> None:
    assert "fan_stall" in command_kinds()
    root = tmp_path / "root"
    sim = Simulator(root, get_shape("inf2.24xlarge"), 1, 1, {"worker_cpu": 0, "driver": driver})
    try:
        parent = "fans/" if driver != "2.30.2.0" else ""
        fans = [root / f"sys/devices/virtual/neuron_device/neuron{d}/{parent}fan" for d in range(6)]
        assert all((f / "fan1_input").read_text() == "1200\n" for f in fans)
        now = sim.t0
        for _ in range(45):  # 2.25 s of the simulator's clock; the files are rewritten every second of it
            now += 0.05
            sim.step(now)
        # 1200 RPM: 20 turns a second, as of the last rewrite (2.05 s, or a step later: the clock's sums round)
        assert 40 <= int((fans[2] / "fan1_turns").read_text()) <= 43
        sim.apply({"id": 1, "kind": "fan_stall", "device": 2})
        sim.apply({"id": 2, "kind": "fan_stall", "device": 9})
    finally:
        sim.shutdown()
    truth = GroundTruth(root / GROUND_TRUTH_FILE)
    acks = {e["id"]: e for e in truth.events("command")}
    assert acks[1]["ok"] and acks[1]["device"] == 2
    assert not acks[2]["ok"] and acks[2]["error"] == "no device 9"
    assert (fans[2] / "fan1_input").read_text() == "0\n" and (fans[1] / "fan1_input").read_text() == "1200\n"
    assert truth.events("totals")[-1]["fan_rpm"] == {"0": 1200, "1": 1200, "2": 0, "3": 1200, "4": 1200, "5": 1200}


def test_the_daemon_and_the_exporter_read_the_simulated_group(fan_group: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    sim = Simulator(root, get_shape("inf2.24xlarge"), 1, 1, {"worker_cpu": 0})
    try:
        sim.apply({"kind": "fan_stall", "device": 3})
        conf = tmp_path / "conf.json"
        conf.write_text(json.dumps(CONFIG))
        # the daemon, a real process: its groups package has the folder too (what installing the folder does)
        boot = (
            "import sys, neuron_monitor.groups as g; g.__path__.append(sys.argv[1]); "
            "from neuron_monitor.daemon.cli import main; sys.exit(main(sys.argv[2:]))"
        )
        cmd = [sys.executable, "-c", boot, str(fan_group), "-c", str(conf), "--root", str(root), "--once", "--no-imds"]
        got = subprocess.run(cmd, cwd=REPO, capture_output=True, timeout=120)
    finally:
        sim.shutdown()
    assert got.returncode == 0, got.stderr.decode()[-2000:]
    report = json.loads(got.stdout.decode().splitlines()[-1])
    fan = report["system_data"]["fan_speed"]
    assert fan["rpm"] == {"0": 1200.0, "1": 1200.0, "2": 1200.0, "3": 0.0, "4": 1200.0, "5": 1200.0}, fan
    series = parse(scrape(feed([report])))
    assert one(series, "fan_speed_rpm", fan="3") == 0.0
    assert one(series, "fan_speed_rpm", fan="5") == 1200.0


def test_a_command_answered_twice_is_refused(fan_group: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (_, fan_part), *_ = [(n, p) for n, p in part_module.parts() if n == "fan_speed"]
    monkeypatch.setattr(fan_part, "commands", ("fan_stall", "ecc_corrected"))
    twice = "command 'ecc_corrected' of the neuron_hw_counters part is fan_speed's already"
    with pytest.raises(ValueError, match=twice):
        Simulator(tmp_path / "root", get_shape("inf2.xlarge"), 1, 1, {"worker_cpu": 0})
    monkeypatch.setattr(fan_part, "commands", ("pause",))
    with pytest.raises(ValueError, match="command 'pause' of the fan_speed part is the simulator's already"):
        Simulator(tmp_path / "root2", get_shape("inf2.xlarge"), 1, 1, {"worker_cpu": 0})
