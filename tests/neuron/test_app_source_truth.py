"""Ground-truth tests of the app source and runtime groups against an in-process simulator stepped by hand.

The simulator writes the real byte layouts (NDS slabs, the ioctl file, sysfs) and keeps exact per-runtime counts;
the daemon-side code reads only the files. Steps are driven here, so the counts are deterministic.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.groups.execution_stats.collector import ExecutionStats
from neuron_monitor.groups.memory_used.collector import MemoryUsed
from neuron_monitor.groups.neuroncore_counters.collector import NeuroncoreCounters
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.app import App
from neuron_monitor.neuron.apps import NeuronAppSource
from neuron_monitor.sim.animator import Runtime, Simulator
from neuron_monitor.sim.ground_truth import GROUND_TRUTH_FILE, GroundTruth
from neuron_monitor.sim.shapes import get_shape

QUIET = {"load_time": 0.0, "memory_interval": 0, "ecc_rate": 0, "worker_cpu": 0, "truth_interval": 1e9}
ERRORS = {"generic_error_rate": 0.01, "numerical_error_rate": 0.02, "timeout_rate": 0.01,
          "failed_to_queue_rate": 0.01, "hardware_error_rate": 0.005}  # fmt: skip


class Rig:
    """A simulator stepped by hand plus the daemon-side source, tracking apps like the scheduler does."""

    def __init__(self, root: Path, shape: str, runtimes: int, **options: Any) -> None:
        opts = {**QUIET, "exec_rate": 200.0, **ERRORS, **options}
        self.sim = Simulator(root, get_shape(shape, opts.pop("lnc", None)), runtimes, 7, opts)
        self.now = self.sim._last
        self.source = NeuronAppSource(RootFS(root))
        self.apps: dict[int, App] = {}
        self.sums: dict[tuple[str, int], dict[str, int]] = {}  # (group name, pid) -> summed counters

    def advance(self, steps: int = 5, dt: float = 0.05) -> None:
        for _ in range(steps):
            self.now += dt
            self.sim.step(self.now)

    def snapshot(self) -> tuple[list[App], list[App]]:
        snap = {a.pid: a for a in self.source.snapshot()}
        gone = [a for pid, a in self.apps.items() if pid not in snap]
        self.apps = snap
        return list(snap.values()), gone

    def collect(self, group: ExecutionStats, name: str, apps: list[App], gone: list[App]) -> dict[int, Any]:
        out = group.collect(apps, gone)
        for pid, body in out.items():
            acc = self.sums.setdefault((name, pid), {})
            for section in ("execution_summary", "error_summary"):
                for k, v in body[section].items():
                    acc[k] = acc.get(k, 0) + v
        return out

    def runtime(self, tag: str) -> Runtime:
        return next(r for r in reversed(self.sim.runtimes) if r.tag == tag)

    def close(self) -> None:
        self.source.close()
        self.sim.shutdown()


@pytest.fixture
def rig_factory(tmp_path: Path) -> Iterator[Any]:
    rigs: list[Rig] = []

    def make(shape: str = "trn1.32xlarge", runtimes: int = 2, **options: Any) -> Rig:
        rig = Rig(tmp_path / f"root{len(rigs)}", shape, runtimes, **options)
        rigs.append(rig)
        return rig

    yield make
    for r in rigs:
        r.close()


def test_exact_counts_and_nothing_lost_when_a_runtime_exits(rig_factory: Any) -> None:
    rig = rig_factory("trn1.32xlarge", 2)
    stats = ExecutionStats(RootFS("/"))
    rig.collect(stats, "es", *rig.snapshot())
    a, b = rig.runtime("job-00"), rig.runtime("job-01")
    for i in range(6):
        rig.advance(7)
        if i == 3:
            rig.sim.apply({"kind": "numerical_burst", "tag": "job-00", "count": 41})
            rig.sim.apply({"kind": "stop_runtime", "tag": "job-00"})  # exits between two collections
        rig.collect(stats, "es", *rig.snapshot())
    rig.sim.apply({"kind": "pause"})
    rig.collect(stats, "es", *rig.snapshot())
    assert a.counts["completed"] > 500 and a.counts["numerical"] >= 41
    assert rig.sums[("es", a.pid)] == a.counts
    assert rig.sums[("es", b.pid)] == b.counts
    assert a.pid not in rig.apps  # left the listing after its final counts were reported


def test_nothing_counted_twice_with_mixed_periods(rig_factory: Any) -> None:
    rig = rig_factory("inf2.24xlarge", 3)
    fast, slow = ExecutionStats(RootFS("/")), ExecutionStats(RootFS("/"))
    apps, gone = rig.snapshot()
    rig.collect(fast, "fast", apps, gone)
    rig.collect(slow, "slow", apps, gone)
    pending_slow: list[App] = []
    for i in range(12):
        rig.advance(3)
        if i == 5:
            rig.sim.apply({"kind": "stop_runtime", "tag": "job-02"})
        apps, gone = rig.snapshot()
        pending_slow += gone
        rig.collect(fast, "fast", apps, gone)
        if i % 4 == 3:
            rig.collect(slow, "slow", apps, pending_slow)
            pending_slow = []
    rig.sim.apply({"kind": "pause"})
    apps, gone = rig.snapshot()
    rig.collect(fast, "fast", apps, gone)
    rig.collect(slow, "slow", apps, pending_slow + gone)
    for tag in ("job-00", "job-01", "job-02"):
        rt = rig.runtime(tag)
        assert rig.sums[("fast", rt.pid)] == rt.counts == rig.sums[("slow", rt.pid)], tag


@pytest.mark.parametrize("driver", ["2.30.2.0", "2.24.7.0"])
def test_counters_carried_over_in_a_reused_slot_are_not_new_work(rig_factory: Any, driver: str) -> None:
    rig = rig_factory("trn1.2xlarge", 1, slot_policy="lowest", driver=driver)
    stats = ExecutionStats(RootFS("/"))
    rig.collect(stats, "es", *rig.snapshot())
    rig.advance(10)
    rig.collect(stats, "es", *rig.snapshot())
    rig.sim.apply({"kind": "stop_runtime", "tag": "job-00"})
    rig.collect(stats, "es", *rig.snapshot())
    rig.sim.apply({"kind": "start_runtime", "like": "job-00", "new_tag": "job-new"})
    new = rig.runtime("job-new")
    old = rig.runtime("job-00")
    assert new.slots == old.slots  # the same NDS slot, with the old owner's counters (driver >= 2.30)
    rig.advance(10)
    rig.collect(stats, "es", *rig.snapshot())
    rig.sim.apply({"kind": "pause"})
    rig.collect(stats, "es", *rig.snapshot())
    assert rig.sums[("es", old.pid)] == old.counts
    assert rig.sums[("es", new.pid)] == new.counts


@pytest.mark.parametrize("driver", ["2.30.2.0", "2.24.7.0"])
def test_runtime_started_while_watching(rig_factory: Any, driver: str) -> None:
    """Old drivers zero a slab for each owner: counted from its start. On >= 2.30 a slot we never watched may hold
    earlier owners' counts, so counting starts at first sight (at most one collection of work is not reported)."""
    rig = rig_factory("trn1.32xlarge", 1, driver=driver)
    stats = ExecutionStats(RootFS("/"))
    rig.collect(stats, "es", *rig.snapshot())
    rig.sim.apply({"kind": "stop_runtime", "tag": "job-00"})
    rig.sim.apply({"kind": "start_runtime", "like": "job-00", "new_tag": "later"})
    rig.advance(4)  # it works before the daemon first sees it
    later = rig.runtime("later")
    before_first_sight = dict(later.counts)
    assert before_first_sight["completed"] > 0
    rig.collect(stats, "es", *rig.snapshot())
    rig.advance(4)
    rig.sim.apply({"kind": "pause"})
    rig.collect(stats, "es", *rig.snapshot())
    got = rig.sums[("es", later.pid)]
    if driver.startswith("2.24"):
        assert got == later.counts
    else:
        assert got == {k: v - before_first_sight[k] for k, v in later.counts.items()}


def test_device_vanishing_mid_collection(rig_factory: Any) -> None:
    rig = rig_factory("trn1.32xlarge", 16)
    stats = ExecutionStats(RootFS("/"))
    rig.collect(stats, "es", *rig.snapshot())
    rig.advance(5)
    victim = rig.runtime("job-03")
    (dev,) = victim.plan.cores
    rig.sim.apply({"kind": "remove_device", "device": dev})
    apps, gone = rig.snapshot()
    assert victim.pid not in {a.pid for a in apps}
    assert [a.pid for a in gone] == [victim.pid]
    rig.collect(stats, "es", apps, gone)
    assert rig.sums[("es", victim.pid)] == victim.counts  # its final counts, read from the kept mapping
    rig.advance(5)
    rig.collect(stats, "es", *rig.snapshot())
    assert len(rig.apps) == 15


def test_tags_openers_without_datastore_and_hung_runtime(rig_factory: Any) -> None:
    rig = rig_factory("trn2.48xlarge", 3, tags=["a" * 255, None, "short"], utilization=0.5)
    apps, _ = rig.snapshot()
    tags = {a.pid: a.tag for a in apps}
    untagged = rig.sim.runtimes[1]
    assert tags[rig.sim.runtimes[0].pid] == "a" * 255
    assert tags[untagged.pid] == str(untagged.pid)
    assert len(apps) == 3  # the simulator's own datastore-less opener on device 0 is not an application
    counters = NeuroncoreCounters(RootFS("/"))
    counters.collect(apps, [])
    rig.sim.apply({"kind": "hang_runtime", "tag": "short"})
    rig.advance(10)
    apps, gone = rig.snapshot()
    out = counters.collect(apps, gone)
    hung = rig.runtime("short")
    hung_cores = out[hung.pid]["neuroncores_in_use"]
    assert hung_cores and all(c["neuroncore_utilization"] == 0 and c["flops"] == 0 for c in hung_cores.values())
    assert all("v3d" in c for c in hung_cores.values())
    busy = out[rig.sim.runtimes[0].pid]["neuroncores_in_use"]
    assert all(c["neuroncore_utilization"] > 0 for c in busy.values())


def test_memory_matches_ground_truth(rig_factory: Any) -> None:
    rig = rig_factory("trn2.48xlarge", 20, lnc=1)  # more runtimes than devices: shared devices
    group = MemoryUsed(RootFS("/"))
    group.collect(*rig.snapshot())
    rig.advance(2)
    apps, _ = rig.snapshot()
    out = group.collect(apps, [])
    truth = GroundTruth(rig.sim.root / GROUND_TRUTH_FILE)
    rig.sim._write_totals()
    totals = truth.latest_totals()["runtimes"]
    assert len(out) == 20
    for pid, body in out.items():
        t = totals[str(pid)]
        used = body["neuron_runtime_used_bytes"]
        assert used["usage_breakdown"]["host"] == t["host_mem"]
        assert used["host"] == sum(t["host_mem"].values())
        per_core = used["usage_breakdown"]["neuroncore_memory_usage"]
        expected = {}
        for key, mem in t["core_mem"].items():
            dev, core = map(int, key.split(":"))
            expected[str(dev * 8 + core)] = mem  # LNC=1: 8 logical cores per device
        assert per_core == expected
        assert used["neuron_device"] == sum(sum(m.values()) for m in t["core_mem"].values())
        assert body["loaded_models"] and all(m["is_running"] for m in body["loaded_models"])
