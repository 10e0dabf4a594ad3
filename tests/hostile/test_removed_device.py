"""A device that vanishes under a runtime using several devices: its cores carry an error, then leave the report.

Before (issue 20): a removed device's cores were still reported for its runtime 33 s later, with no error.
After: the first snapshot after the removal names the device in the runtime's error and the device's final counts
are still reported once; from the next snapshot on its cores are gone. Stepped by hand: deterministic.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_monitor.groups.neuroncore_counters.collector import NeuroncoreCounters
from neuron_monitor.host.rootfs import RootFS
from tests.neuron.test_app_source_truth import Rig


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path / "root", "trn1.32xlarge", 2)  # 16 devices: each runtime spans 8
    yield r
    r.close()


def test_removed_device_cores_carry_an_error_then_leave(rig: Rig) -> None:
    counters = NeuroncoreCounters(RootFS("/"))
    apps, _ = rig.snapshot()
    counters.collect(apps, [])
    rig.advance(5)
    victim = rig.runtime("job-00")
    devices = sorted(victim.plan.cores)
    assert len(devices) > 1
    dev = devices[-1]
    cores_per_device = 2  # trn1: two NeuronCores per device
    lost = {str(dev * cores_per_device + k) for k in range(cores_per_device)}
    apps, _ = rig.snapshot()
    before = counters.collect(apps, [])[victim.pid]["neuroncores_in_use"]
    assert lost <= set(before)

    rig.sim.apply({"kind": "remove_device", "device": dev})
    rig.advance(5)
    apps, gone = rig.snapshot()
    app = next(a for a in apps if a.pid == victim.pid)  # still running on its other devices
    assert f"neuron{dev} removed" in app.error
    counters.collect(apps, gone)  # the removed device's final counts, once

    rig.advance(5)
    apps, gone = rig.snapshot()
    app = next(a for a in apps if a.pid == victim.pid)
    assert f"neuron{dev} removed" in app.error
    after = counters.collect(apps, gone)[victim.pid]["neuroncores_in_use"]
    assert not lost & set(after)  # its cores left the report
    assert after  # the runtime's other cores are still reported
    other = next(a for a in apps if a.pid != victim.pid)
    assert not other.error
