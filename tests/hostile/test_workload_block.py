"""A workload writes its own data block: no value in it may end the daemon or reach a report as a number.

Before (issue 32): host-memory counters set to 2^64-1 made the next report raise "Integer exceeds 64-bit range"
(the daemon exited 1, one pod put node monitoring in a restart loop); a block of random bytes passed through as
counts like 2e16 per period. After: a delta past what the hardware can count in the period, and a memory figure
past what it can hold (neuron/plausible.py), make that runtime's group object an ``error``; the report encodes,
the other runtime is untouched, the next clean period counts again. Each case runs with the compiled helper and
with the pure-Python twins. Stepped by hand (an in-process simulator), so deterministic.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from neuron_monitor.daemon import report as rpt
from neuron_monitor.daemon.config import plan_from_data
from neuron_monitor.daemon.scheduler import Collector
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import layout as L
from neuron_monitor.sim.datastore import SlabWriter
from tests.neuron.test_app_source_truth import Rig

GROUPS = ("execution_stats", "memory_used", "neuroncore_counters")
PLAN = {"period": "1s", "neuron_runtimes": [{"metrics": [{"type": g} for g in GROUPS]}]}


class Daemon:
    """A collector over a hand-stepped simulator, with the daemon's report encoder."""

    def __init__(self, rig: Rig) -> None:
        self.rig = rig
        plan = plan_from_data(PLAN, "t.conf")
        self.collector = Collector(
            RootFS("/"), plan, rig.source, lambda: rpt.empty_hardware_info(""), lambda: rpt.empty_instance_info("")
        )
        self.collector.prime()

    def report(self, tag: str = "", poke: Callable[[SlabWriter], None] | None = None) -> dict[str, Any]:
        """The next report; ``poke`` writes into runtime ``tag``'s blocks after the simulator's step (which
        rewrites its counters from its own mirror) and before the collection."""
        self.rig.advance(5)
        if poke is not None:
            for w in self.rig.runtime(tag).writers.values():
                poke(w)
        self.collector.collect_on_loop(self.collector.units)
        line = rpt.encode(self.collector.build_report())
        decoded: dict[str, Any] = orjson.loads(line)
        return decoded

    def groups(self, tag: str, poker: str = "", poke: Callable[[SlabWriter], None] | None = None) -> dict[str, Any]:
        report = self.report(poker, poke)
        entry = next(e for e in report["neuron_runtime_data"] if e["neuron_runtime_tag"] == tag)
        groups: dict[str, Any] = entry["report"]
        return groups


@pytest.fixture
def daemon(tmp_path: Path, helper_mode: str) -> Iterator[Daemon]:
    rig = Rig(tmp_path / "root", "trn1.2xlarge", 2)
    yield Daemon(rig)
    rig.close()


def set_host_memory(value: int) -> Callable[[SlabWriter], None]:
    def poke(w: SlabWriter) -> None:
        for c in range(L.ND_MEM_CODE_HOST, L.ND_MEM_MISC_HOST + 1):
            w.set_nd(c, value)

    return poke


def set_nc(counter: int, value: int, cores: tuple[int, ...] = (0,)) -> Callable[[SlabWriter], None]:
    def poke(w: SlabWriter) -> None:
        for core in cores:
            w.set_nc(core, counter, value)

    return poke


def random_block(seed: int) -> Callable[[SlabWriter], None]:
    rng = random.Random(seed)

    def poke(w: SlabWriter) -> None:
        w.view[8 : L.NDS_END] = rng.randbytes(L.NDS_END - 8)

    return poke


def assert_encodable_numbers(obj: Any) -> None:
    """Every number in ``obj`` fits what JSON consumers take (an int within 64 bits, a finite float)."""
    if isinstance(obj, dict):
        for v in obj.values():
            assert_encodable_numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            assert_encodable_numbers(v)
    elif isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return
    elif isinstance(obj, int):
        assert 0 <= obj < 2**53, obj
    else:
        assert isinstance(obj, float) and abs(obj) < 1e300


CASES: dict[str, tuple[Callable[[SlabWriter], None], tuple[str, ...], str]] = {
    "host memory 2^64-1": (set_host_memory(2**64 - 1), ("memory_used",), "memory past what the hardware holds"),
    "host memory 2^63": (set_host_memory(2**63), ("memory_used",), "memory past what the hardware holds"),
    "device memory 2^64-1": (
        set_nc(L.NC_MEM_TENSORS_DEVICE, 2**64 - 1, (0, 1)),
        ("memory_used",),
        "memory past what the hardware holds",
    ),
    "completed 2^64-1": (set_nc(L.NC_INFER_COMPLETED, 2**64 - 1), ("execution_stats",), "completed grew by"),
    "a rare error count jumps": (set_nc(L.NC_ERR_HW, 10**15, (1,)), ("execution_stats",), "hardware errors grew"),
    "time in use 2^64-1": (
        set_nc(L.NC_TIME_IN_USE, 2**64 - 1),
        ("memory_used", "neuroncore_counters"),
        "time in use (us) grew by",
    ),
    "MAC count 2^63": (set_nc(L.NC_MAC_COUNT, 2**63, (1,)), ("neuroncore_counters",), "MAC count grew by"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_forged_value_is_that_runtimes_error_and_the_report_encodes(daemon: Daemon, case: str) -> None:
    poke, failing, words = CASES[case]
    daemon.report()
    victim = daemon.groups("job-00", "job-00", poke)
    for name in GROUPS:
        if name in failing:
            assert words in victim[name]["error"], (name, victim[name])
            assert set(victim[name]) == {"period", "error", "fresh"}  # no number of the damaged period
        else:
            assert victim[name]["error"] == "", (name, victim[name])
    other = daemon.groups("job-01")  # the next report, the other runtime
    assert all(other[name]["error"] == "" for name in GROUPS)
    assert_encodable_numbers(other)


def test_random_blocks_never_end_the_daemon_nor_pass_as_counts(daemon: Daemon) -> None:
    """A runtime rewriting its whole block with random bytes every period: every report encodes, every number in
    it is a plausible one, the counting groups carry an error each period, the other runtime is clean."""
    daemon.report()
    errors = 0
    for seed in range(6):
        report = daemon.report("job-00", random_block(seed))
        assert_encodable_numbers(report)
        by_tag = {e["neuron_runtime_tag"]: e["report"] for e in report["neuron_runtime_data"]}
        errors += sum(1 for g in GROUPS if by_tag.get("job-00", {}).get(g, {}).get("error"))
        clean = by_tag["job-01"]
        assert all(clean[g]["error"] == "" for g in GROUPS)
    assert errors >= 6 * 2  # execution_stats and neuroncore_counters every period at least


def test_counting_resumes_after_a_damaged_period(daemon: Daemon) -> None:
    """The damaged jump is never counted, nor counted from: the reading after it is a new baseline (the counter
    rule, util/counters.py), the one after that counts."""
    daemon.report()
    damaged = daemon.groups("job-00", "job-00", set_nc(L.NC_INFER_COMPLETED, 2**62, (0, 1)))
    assert "completed grew by" in damaged["execution_stats"]["error"]
    stats = daemon.groups("job-00", "job-00", set_nc(L.NC_INFER_COMPLETED, 2**62 + 5, (0, 1)))["execution_stats"]
    assert stats["error"] == ""
    assert stats.get("execution_summary", {}).get("completed", 0) == 0  # a new baseline: nothing counted
    stats = daemon.groups("job-00", "job-00", set_nc(L.NC_INFER_COMPLETED, 2**62 + 12, (0, 1)))["execution_stats"]
    assert stats["execution_summary"]["completed"] == 7 * 2  # per core


def test_a_core_counter_near_two_to_the_64_is_no_baseline(daemon: Daemon) -> None:
    """A completed count of 2^64-1 was kept as the baseline, so the next good value counted whole (+360 for a true
    +10): now it is refused, the next good value is a baseline, and +10 counts 10."""
    daemon.report()
    bad = daemon.groups("job-00", "job-00", set_nc(L.NC_INFER_COMPLETED, 2**64 - 1, (0, 1)))["execution_stats"]
    assert "completed" in bad["error"]
    daemon.groups("job-00", "job-00", set_nc(L.NC_INFER_COMPLETED, 360, (0, 1)))
    stats = daemon.groups("job-00", "job-00", set_nc(L.NC_INFER_COMPLETED, 370, (0, 1)))["execution_stats"]
    assert stats["error"] == ""
    assert stats["execution_summary"]["completed"] == 10 * 2  # per core


def test_large_but_plausible_values_are_numbers(daemon: Daemon) -> None:
    """256 GiB of host memory and a busy core are not damage: no error, the values reported."""
    daemon.report()
    used = daemon.groups("job-00", "job-00", set_host_memory(64 << 30))["memory_used"]
    assert used["error"] == ""
    blocks = len(daemon.rig.runtime("job-00").writers)
    assert used["neuron_runtime_used_bytes"]["host"] == 4 * (64 << 30) * blocks


def test_a_model_record_with_forged_sizes_is_an_error(daemon: Daemon) -> None:
    """Model records carry their own hash, which the workload can compute: forged sizes in a valid record."""
    from neuron_monitor.sim.datastore import ModelRecord

    daemon.report()
    huge = dict.fromkeys(range(5), 2**64 - 1)
    forged = ModelRecord(9, 1, "forged", os.urandom(16), 0, 0, huge, huge)
    used = daemon.groups("job-00", "job-00", lambda w: w.write_model(3, forged))["memory_used"]
    assert "memory past what the hardware holds" in used["error"]
