"""The same simulated host on every driver layout (``SIM_LAYOUTS``) gives the driver-node groups the same bodies at
the same moments: one seed, one clock (stepped by the test, wall time included), the same faults (uncorrected and
repairable ECC, an unhealthy component, a hardware error event, a power roll-up without data, a device reset);
only where the files are differs. Today's layout is the reference: a body that differs on a reorganized layout is
a node the readers did not find (issue 37 item 1)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.groups.neuron_device_health.collector import NeuronDeviceHealth
from neuron_monitor.groups.neuron_device_telemetry import collector as telemetry
from neuron_monitor.groups.neuron_hw_counters.collector import NeuronHwCounters
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.sim import animator
from neuron_monitor.sim.animator import Simulator
from neuron_monitor.sim.shapes import get_shape
from tests.conftest import SIM_LAYOUTS

# (second of the run, command) applied before that second's collection
FAULTS = (
    (3, {"kind": "ecc_uncorrected", "device": 2, "count": 2}),
    (3, {"kind": "unhealthy", "device": 5, "component": "hbm"}),
    (4, {"kind": "ecc_repairable", "device": 7}),
    (4, {"kind": "hw_error_event", "device": 1, "count": 3}),
    (5, {"kind": "power_no_data", "device": 3}),
    (6, {"kind": "ecc_corrected", "device": 9, "memory": "sram", "count": 4}),
    (7, {"kind": "reset_device", "device": 2}),
    (7, {"kind": "healthy", "device": 5}),
)
SECONDS = 9


class FakeTime:
    """The simulator's and the collectors' clock, monotonic and wall, moved by the test."""

    def __init__(self) -> None:
        self.now = 10_000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1_795_000_000.0 + self.now


def bodies(root: Path, driver: str) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(second, group, body) of a trn2.48xlarge with 4 runtimes on ``driver``, collected once a simulated second."""
    fake = FakeTime()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(animator, "time", fake)
        mp.setattr(telemetry, "time", fake)
        options = {"driver": driver, "worker_cpu": 0, "errors": True, "ecc_rate": 0.3, "step": 0.05}
        sim = Simulator(root, get_shape("trn2.48xlarge"), 4, 11, options)
        groups = {"neuron_hw_counters": NeuronHwCounters(RootFS(root)),
                  "neuron_device_telemetry": telemetry.NeuronDeviceTelemetry(RootFS(root)),
                  "neuron_device_health": NeuronDeviceHealth(RootFS(root), clock=fake.time)}  # fmt: skip
        try:
            sim.step(fake.now)
            for group in groups.values():
                group.prime()
            for second in range(1, SECONDS + 1):
                for _ in range(20):
                    fake.now += 0.05
                    sim.step(fake.now)
                for at, command in FAULTS:
                    if at == second:
                        sim.apply(dict(command))
                for name, group in groups.items():
                    yield second, name, group.collect()
        finally:
            for group in groups.values():
                group.close()
            sim.shutdown()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[int, str, dict[str, Any]]]:
    return list(bodies(tmp_path_factory.mktemp("today") / "root", SIM_LAYOUTS[0]))


@pytest.mark.parametrize("driver", SIM_LAYOUTS[1:])
def test_every_layout_gives_the_same_bodies_at_the_same_moments(
    reference: list[tuple[int, str, dict[str, Any]]], tmp_path: Path, driver: str
) -> None:
    # the reference saw the faults: an uncorrected ECC count, a component unhealthy, then healthy again
    by_moment = {(second, name): body for second, name, body in reference}
    assert all(not body.get("error") for body in by_moment.values()), [b["error"] for b in by_moment.values()]

    def device5(second: int) -> dict[str, Any]:
        body = by_moment[(second, "neuron_device_telemetry")]
        entry: dict[str, Any] = next(d for d in body["neuron_devices"] if d["neuron_device_index"] == 5)
        return entry

    assert device5(3)["unhealthy_components"] == ["hbm"] and device5(8)["unhealthy_components"] == []
    for second, name, body in bodies(tmp_path / "root", driver):
        assert body == by_moment[(second, name)], (driver, second, name)
