"""The device listing at report periods under a second: kept up to DEVICE_LISTING_MAX_AGE, listed again sooner
when a device fails. The collections' clock is stepped by hand (RootFS.begin_collection(now)): deterministic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_monitor.neuron.app import App
from neuron_monitor.neuron.sysfs import CLASS_DIR, DEVICE_LISTING_MAX_AGE
from tests.neuron.test_app_source_truth import Rig


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path / "root", "trn1.32xlarge", 2)
    yield r
    r.close()


def collect(rig: Rig, now: float) -> list[App]:
    root = rig.source.root
    root.begin_collection(now)
    try:
        return rig.snapshot()[0]
    finally:
        root.end_collection()


def count_listings(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    listed: list[str] = []
    root = rig.source.root
    real = root._list

    def spy(rel: str) -> list[str]:
        listed.append(rel)
        return real(rel)

    monkeypatch.setattr(root, "_list", spy)
    return listed


def test_a_removed_device_leaves_the_snapshot_within_the_listing_age(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    listed = count_listings(rig, monkeypatch)
    t = 1000.0
    collect(rig, t)
    assert listed.count(CLASS_DIR) == 1
    victim = rig.runtime("job-00")
    dev = max(victim.plan.cores)
    rig.sim.apply({"kind": "remove_device", "device": dev})  # the simulator's kept ioctl file still answers
    steps = 0
    while True:
        rig.advance(1)
        t += 0.1
        steps += 1
        apps = collect(rig, t)
        app = next(a for a in apps if a.pid == victim.pid)
        if f"neuron{dev} removed" in app.error:
            break
        assert steps * 0.1 < DEVICE_LISTING_MAX_AGE + 0.05, "still listed after the listing's age"
    assert listed.count(CLASS_DIR) == 2  # one listing per second of collections 0.1 s apart


def test_a_device_whose_applications_cannot_be_listed_is_listed_again_at_the_next_collection(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = count_listings(rig, monkeypatch)
    collect(rig, 1000.0)
    collect(rig, 1000.1)
    assert listed.count(CLASS_DIR) == 1
    dev = rig.source._devices[3]

    def broken() -> list[object]:
        raise OSError(19, "No such device")

    monkeypatch.setattr(dev, "list_apps", broken)
    collect(rig, 1000.2)  # the failure drops the kept listing
    assert listed.count(CLASS_DIR) == 1
    collect(rig, 1000.3)
    assert listed.count(CLASS_DIR) == 2 and 3 in rig.source._devices  # listed and opened again
    collect(rig, 1000.4)
    assert listed.count(CLASS_DIR) == 2
