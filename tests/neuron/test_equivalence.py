"""The optimized device layer gives byte-for-byte the output of the frozen pre-optimization code (reference/).

Two pipelines read the same hand-stepped simulator (fixed seed) at the same clock: the reference app source and
groups, and the current ones. Every snapshot's applications and every group body (JSON-encoded, so key order,
int/float types and float digits count) must be identical, through errors, memory moves, exits, slot reuse, hung
runtimes, a vanishing device, pauses, a slow group with a longer period, old drivers and chips without ECC files.
The block parser is also driven through random torn, corrupt and rewritten object records and compared.
"""

from __future__ import annotations

import json
import random
import struct
import types
from collections.abc import Iterator
from dataclasses import astuple
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.groups.execution_stats import collector as execution_stats
from neuron_monitor.groups.memory_used import collector as memory_used
from neuron_monitor.groups.neuron_hw_counters import collector as neuron_hw_counters
from neuron_monitor.groups.neuroncore_counters import collector as neuroncore_counters
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import apps as new_apps
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.app import App
from neuron_monitor.neuron.datablock import ND_KEPT, BlockParser
from neuron_monitor.sim.animator import Simulator
from neuron_monitor.sim.datastore import ModelRecord, SlabWriter
from neuron_monitor.sim.shapes import get_shape
from tests.neuron.reference import apps as ref_apps
from tests.neuron.reference import datablock as ref_datablock
from tests.neuron.reference import execution_stats as ref_execution_stats
from tests.neuron.reference import memory_used as ref_memory_used
from tests.neuron.reference import neuron_hw_counters as ref_neuron_hw_counters
from tests.neuron.reference import neuroncore_counters as ref_neuroncore_counters

RUNTIME_GROUPS = ("neuroncore_counters", "execution_stats", "memory_used")
NEW = {"neuroncore_counters": neuroncore_counters, "execution_stats": execution_stats, "memory_used": memory_used}
REF = {"neuroncore_counters": ref_neuroncore_counters, "execution_stats": ref_execution_stats,
       "memory_used": ref_memory_used}  # fmt: skip
BASE_OPTIONS = {"load_time": 0.0, "worker_cpu": 0, "truth_interval": 1e9, "exec_rate": 150.0,
                "memory_interval": 0.3, "ecc_rate": 1.5, "generic_error_rate": 0.01, "numerical_error_rate": 0.02,
                "timeout_rate": 0.01, "failed_to_queue_rate": 0.01, "hardware_error_rate": 0.005}  # fmt: skip


class Pipeline:
    """One app source and its groups (a fast and a slow instance of each runtime group), tracking apps like the
    scheduler: a pid missing from a snapshot is handed to each group once as gone."""

    def __init__(self, root: Path, source_cls: Any, groups: dict[str, Any], hw_cls: Any) -> None:
        fs = RootFS(root)
        self.source = source_cls(fs)
        self.fast = {n: m.GROUP(fs) for n, m in groups.items()}
        self.slow = {n: m.GROUP(fs) for n, m in groups.items()}
        self.hw = hw_cls(fs)
        self.hw.prime()
        self.apps: dict[int, App] = {}
        self.pending_slow: list[App] = []

    def round(self, slow: bool) -> dict[str, Any]:
        snap = {a.pid: a for a in self.source.snapshot()}
        gone = [a for pid, a in self.apps.items() if pid not in snap]
        self.apps = snap
        self.pending_slow += gone
        apps = list(snap.values())
        out: dict[str, Any] = {"apps": [(a.pid, a.tag, a.error, a.devices) for a in apps]}
        for name, group in self.fast.items():
            out[f"fast {name}"] = group.collect(apps, gone)
        if slow:
            for name, group in self.slow.items():
                out[f"slow {name}"] = group.collect(apps, self.pending_slow)
            self.pending_slow = []
        out["neuron_hw_counters"] = self.hw.collect()
        return out

    def close(self) -> None:
        self.source.close()
        self.hw.close()


class Twin:
    """A simulator stepped by hand and read by the reference and the current pipeline at the same clock."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch, shape: str, runtimes: int, **options: Any) -> None:
        opts = {**BASE_OPTIONS, **options}
        self.sim = Simulator(root, get_shape(shape, opts.pop("lnc", None)), runtimes, 11, opts)
        self.now = self.sim._last
        clock = types.SimpleNamespace(monotonic=lambda: self.now)
        monkeypatch.setattr(ref_apps, "time", clock)
        monkeypatch.setattr(new_apps, "time", clock)
        self.ref = Pipeline(root, ref_apps.NeuronAppSource, REF, ref_neuron_hw_counters.GROUP)
        self.new = Pipeline(root, new_apps.NeuronAppSource, NEW, neuron_hw_counters.GROUP)
        self.rounds = 0
        self.bodies = 0

    def advance(self, steps: int) -> None:
        for _ in range(steps):
            self.now += 0.05
            self.sim.step(self.now)

    def apply(self, kind: str, **params: Any) -> None:
        self.sim.apply({"kind": kind, **params})

    def tag_of(self, index: int) -> str:
        return self.sim.runtimes[index].tag

    def compare(self) -> None:
        slow = self.rounds % 3 == 2
        ref, new = self.ref.round(slow), self.new.round(slow)
        assert ref.keys() == new.keys()
        for key in ref:
            assert json.dumps(new[key]) == json.dumps(ref[key]), f"round {self.rounds}: {key} differs"
            if isinstance(ref[key], dict):
                self.bodies += len(ref[key])
        self.rounds += 1

    def close(self) -> None:
        self.ref.close()
        self.new.close()
        self.sim.shutdown()


@pytest.fixture
def twin_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    twins: list[Twin] = []

    def make(shape: str, runtimes: int, **options: Any) -> Twin:
        twin = Twin(tmp_path / f"root{len(twins)}", monkeypatch, shape, runtimes, **options)
        twins.append(twin)
        return twin

    yield make
    for t in twins:
        t.close()


def run_story(twin: Twin, rng: random.Random) -> None:
    """Collections at uneven intervals with every kind of event in between, compared after each."""
    twin.compare()  # first sight: baselines
    events: dict[int, Any] = {
        2: lambda: twin.apply("numerical_burst", tag=twin.tag_of(0), count=17),
        3: lambda: twin.apply("hardware_error", tag=twin.tag_of(1), count=3),
        4: lambda: twin.apply("stop_runtime", tag=twin.tag_of(0)),
        5: lambda: twin.apply("start_runtime", like=twin.tag_of(0), new_tag="replacement"),
        6: lambda: twin.apply("hang_runtime", tag=twin.tag_of(1)),
        8: lambda: twin.apply("ecc_uncorrected", device=0, count=2, memory="sram"),
        9: lambda: twin.apply("resume_runtime", tag=twin.tag_of(1)),
        10: lambda: twin.apply("pause"),
        12: lambda: twin.apply("resume"),
        13: lambda: twin.apply("stop_runtime", tag=twin.tag_of(len(twin.sim.plans) - 1)),
        14: lambda: twin.apply("start_runtime", untagged=True),
    }
    for i in range(18):
        twin.advance(rng.choice((1, 2, 3, 6)))
        if i in events:
            events[i]()
        if i == 7 and len(twin.sim.devices) > 2:
            victim = twin.sim.runtimes[2]
            twin.apply("remove_device", device=max(victim.plan.cores))
        twin.compare()
        if i == 11:
            twin.compare()  # twice on the same bytes: zero deltas, zero period
    twin.apply("pause")
    twin.compare()


@pytest.mark.parametrize(
    ("shape", "runtimes", "options"),
    [
        ("trn2.48xlarge", 16, {}),
        ("trn2.48xlarge", 3, {"lnc": 1, "tags": ["a" * 255, None, "short"]}),
        ("trn1.32xlarge", 5, {"driver": "2.24.7.0", "slot_policy": "lowest"}),
        ("trn1.2xlarge", 2, {"slot_policy": "lowest"}),
        ("inf1.6xlarge", 3, {}),
    ],
)
def test_same_output_as_the_reference_on_simulator_bytes(
    twin_factory: Any, shape: str, runtimes: int, options: dict[str, Any]
) -> None:
    twin = twin_factory(shape, runtimes, **options)
    run_story(twin, random.Random(shape))
    assert twin.rounds == 21
    assert twin.bodies > 10 * runtimes  # bodies were compared, not empty dicts


def _normal(reading: Any) -> tuple[Any, ...]:
    """A reading as comparable values: the ND counters the current parser reads, the rest as is."""
    nd = tuple(reading.nd[c] for c in ND_KEPT)
    return (reading.time, reading.initialized, nd, reading.nc, reading.tag, [astuple(m) for m in reading.models])


def test_parser_same_as_reference_through_torn_and_corrupt_records() -> None:
    rng = random.Random(5)
    slab = bytearray(L.NDS_SIZE)
    w = SlabWriter(memoryview(slab))
    ref, new = ref_datablock.BlockParser(8), BlockParser(8)

    def model(slot: int) -> ModelRecord:
        uuid = bytes(rng.randrange(256) for _ in range(16))
        return ModelRecord(rng.randrange(1, 5), slot, f"model-{rng.randrange(99)}", uuid, rng.randrange(8),
                           rng.randrange(3), {L.MEM_SLOT_MISC: rng.randrange(1 << 20)},
                           {L.MEM_SLOT_CODE: rng.randrange(1 << 30)})  # fmt: skip

    def corrupt_in(offset: int, size: int) -> None:
        slab[offset + rng.randrange(size)] ^= 1 << rng.randrange(8)

    mutations = [
        lambda: w.init_process(runtime_version=rng.randrange(1, 9)),
        lambda: w.write_process_info(rng.choice(["", "t", "tag-" * rng.randrange(1, 60)])),
        lambda: w.write_model(rng.randrange(L.MODEL_SLOTS), model(rng.randrange(L.MODEL_SLOTS))),
        lambda: w.remove_model(rng.randrange(L.MODEL_SLOTS)),
        lambda: corrupt_in(L.MODEL_RECORDS_OFFSET, L.MODEL_SLOTS * L.MODEL_RECORD_SIZE),
        lambda: corrupt_in(L.PROCESS_INFO_OFFSET, L.PROCESS_INFO_SIZE),
        lambda: corrupt_in(L.PROCESS_EXT_OFFSET, L.PROCESS_EXT_SIZE),
        lambda: struct.pack_into("<I", slab, L.MODEL_RECORDS_OFFSET + rng.randrange(4) * L.MODEL_RECORD_SIZE, 0),
        lambda: struct.pack_into("<Q", slab, L.MODEL_BITMAP_OFFSET, rng.getrandbits(6)),
        lambda: w.set_nc(rng.randrange(8), rng.randrange(31), rng.getrandbits(40)),
        lambda: w.set_nd(rng.randrange(31), rng.getrandbits(40)),
        lambda: slab.__setitem__(slice(0, 4), rng.choice([b"nds\x00", b"\x00\x00\x00\x00"])),
        lambda: w.release(keep_nc_counters=rng.random() < 0.5),
    ]
    w.init_process(runtime_version=3)
    for slot in range(4):
        w.write_model(slot, model(slot))
    seen_models = 0
    for step in range(3000):
        for _ in range(rng.randrange(1, 4)):
            rng.choice(mutations)()
        buf = bytes(slab) if step % 2 else slab
        got, want = new.parse(buf, float(step)), ref.parse(buf, float(step))
        assert _normal(got) == _normal(want), f"step {step}"
        seen_models += len(want.models)
    assert seen_models > 1000
