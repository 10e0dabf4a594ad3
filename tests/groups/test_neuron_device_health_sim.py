"""neuron_device_health against the simulator's faults, time-stepped (no wall clock): each fault makes the very
next watch ask for a report (so it is in a report within one watch interval), clears when its signal clears, and
a healthy simulated hour never fires a rule."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.groups.neuron_device_health import body as K
from neuron_monitor.groups.neuron_device_health.collector import WATCH_INTERVAL, NeuronDeviceHealth
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.sim import animator
from neuron_monitor.sim.animator import Simulator
from neuron_monitor.sim.shapes import get_shape


class FakeTime:
    """The simulator's clock (monotonic and wall), stepped by the test."""

    def __init__(self) -> None:
        self.now = 5000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1_795_000_000.0 + self.now

    def sleep(self, _: float) -> None:
        pass


def _stepped(root: Path, shape: str) -> Iterator[tuple[Simulator, FakeTime]]:
    fake = FakeTime()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(animator, "time", fake)
        sim = Simulator(root, get_shape(shape), 1, 5, {"step": 0.05})
        sim.step(fake.now)
        yield sim, fake
        sim.shutdown()


@pytest.fixture(scope="module")
def stepped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Simulator, FakeTime]]:
    """One simulated trn1.32xlarge for every fault: each test faults a device of its own (16 devices)."""
    yield from _stepped(tmp_path_factory.mktemp("faults") / "root", "trn1.32xlarge")


@pytest.fixture
def small(tmp_path: Path) -> Iterator[tuple[Simulator, FakeTime]]:
    yield from _stepped(tmp_path / "root", "inf2.24xlarge")


def device(body: dict[str, Any], index: int) -> dict[str, Any]:
    return next(d for d in body[K.NEURON_DEVICES] if d[K.DEVICE_INDEX] == index)


# (fault command, clearing command or None, expected state, rule, fault event kind or None); device set per test
FAULTS = [
    ({"kind": "unhealthy", "component": "hbm"}, {"kind": "healthy"}, "unhealthy", "unhealthy_component",
     "health_component"),
    ({"kind": "ecc_uncorrected", "count": 1}, {"kind": "reset_device"}, "unhealthy", "ecc_uncorrected",
     "ecc_uncorrected"),
    ({"kind": "ecc_uncorrected", "count": 2, "memory": "sram"}, {"kind": "reset_device"}, "unhealthy",
     "ecc_uncorrected", "ecc_uncorrected"),
    ({"kind": "ecc_repairable", "count": 3}, {"kind": "reset_device"}, "healthy", "repair_pending", "ecc_repairable"),
    ({"kind": "hw_error_event", "count": 1}, {"kind": "reset_device"}, "unhealthy", "hw_error_event", "hw_error"),
    ({"kind": "power_no_data"}, {"kind": "power_valid"}, "unknown", "power_status", None),
    ({"kind": "remove_device"}, None, "unhealthy", "device_lost", "device_lost"),
]  # fmt: skip


@pytest.mark.parametrize(("fault", "clear", "state", "rule", "kind"), FAULTS, ids=[f[0]["kind"] for f in FAULTS])
def test_each_fault_is_seen_by_the_next_watch_and_clears(
    stepped: tuple[Simulator, FakeTime],
    fault: dict[str, Any],
    clear: dict[str, Any] | None,
    state: str,
    rule: str,
    kind: str | None,
) -> None:
    sim, fake = stepped
    dev = 1 + next(i for i, f in enumerate(FAULTS) if f[0] is fault)
    fault, clear = {**fault, "device": dev}, clear and {**clear, "device": dev}
    group = NeuronDeviceHealth(RootFS(sim.root))
    group.prime()
    assert device(group.collect(), dev)[K.HEALTH][K.STATE] == "healthy"
    for _ in range(3):  # quiet steps: nothing to report
        fake.now += WATCH_INTERVAL
        sim.step(fake.now)
        assert not group.watch()
    sim.apply(fault)
    # the first watch after the driver's files changed asks for the report: within one WATCH_INTERVAL (0.5 s)
    assert group.watch()
    body = group.collect()
    health = device(body, dev)[K.HEALTH]
    assert health[K.STATE] == state
    assert rule in [r[K.RULE] for r in health[K.REASONS]]
    if kind is not None:
        assert device(body, dev)[K.FAULT_EVENTS][kind][K.COUNT] >= 1
    assert device(body, 0)[K.HEALTH][K.STATE] == "healthy"  # localized to the device
    if clear is None:
        return
    fake.now += WATCH_INTERVAL
    sim.step(fake.now)
    sim.apply(clear)
    assert group.watch()
    body = group.collect()
    assert device(body, dev)[K.HEALTH][K.STATE] == "healthy" and device(body, dev)[K.HEALTH][K.REASONS] == []
    assert device(body, dev)[K.FAULT_EVENTS] == {}  # clearing is not an event


def test_no_rule_fires_over_a_healthy_simulated_hour(small: tuple[Simulator, FakeTime]) -> None:
    sim, fake = small
    group = NeuronDeviceHealth(RootFS(sim.root))
    group.prime()
    early = 0
    start = fake.now
    step = 2.5  # seconds of simulated time per step; power roll-ups change each simulated minute
    while fake.now - start < 3600.0:
        fake.now += step
        sim.step(fake.now)
        early += group.watch()
        if round(fake.now - start, 3) % 5 == 0:  # the group's 5 s collections
            body = group.collect()
            assert body[K.NODE][K.STATE] == "healthy", body[K.NODE]
            assert all(not d[K.HEALTH][K.REASONS] and not d[K.FAULT_EVENTS] for d in body[K.NEURON_DEVICES])
    assert early == 0  # not one early report in the hour
    ecc: list[dict[str, int]] = getattr(sim.part("neuron_hw_counters"), "ecc")  # noqa: B009 - the part's own
    assert sum(sum(c.values()) for c in ecc) > 0  # corrected ECC events did happen (not a fault)
