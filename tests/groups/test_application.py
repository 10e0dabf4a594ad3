"""One application's data-block groups in one compiled call (groups/application.py) against its twin, the three
groups' own paths: the same bodies (bytes and key order), the same state left in each group, over hypothesis-drawn
series of real-format data blocks (written as the runtime writes them, parsed by the daemon's parser), hostile
ones included (a workload writes its own data block: counters that jump, go back, sit at 2^64 - 1), readings
with no interval, groups collected at different times, and departures."""

from __future__ import annotations

import random
from array import array
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from neuron_monitor.groups import application
from neuron_monitor.groups.application import (
    collect_application_careful,
    collect_application_native,
    collect_applications,
)
from neuron_monitor.groups.execution_stats.collector import ExecutionStats
from neuron_monitor.groups.memory_used.collector import MemoryUsed
from neuron_monitor.groups.neuroncore_counters.collector import NeuroncoreCounters
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.app import App
from neuron_monitor.neuron.apps import AppData, DeviceData
from neuron_monitor.neuron.appsinfo import AppInfo
from neuron_monitor.neuron.datablock import BlockParser, BlockReading
from neuron_monitor.neuron.hardware import Topology
from neuron_monitor.sim.datastore import ModelRecord, SlabWriter
from tests.neuron.appdata import TRN1, TRN2

PID = 4321
LNC2_NO_BREAKDOWN = Topology((0, 1, 2, 3), 8, 2, None, "")  # logical cores without a chip: the helper declines
_U64_MAX = 2**64 - 1
_HOSTILE_VALUES = st.one_of(
    st.sampled_from([0, 1, 2**53, 2**53 + 1, 2**60, 2**63, _U64_MAX, _U64_MAX - 1]),
    st.integers(min_value=0, max_value=_U64_MAX),
)
_MEM = tuple(c for _, c in L.DEVICE_MEM_COUNTERS)


class Groups:
    """One world: the three groups of a scope."""

    def __init__(self, root: RootFS) -> None:
        self.nc = NeuroncoreCounters(root)
        self.es = ExecutionStats(root)
        self.mu = MemoryUsed(root)
        self.all = (self.nc, self.es, self.mu)

    def state(self) -> Any:
        """What each group keeps of an application, as comparable values."""
        looks = []
        for g in self.all:
            seen = g.tracker.looks(PID) or {}
            looks.append({d: (tuple(c), t) for d, (c, t, _picks) in seen.items()})
            looks.append(sorted(g.tracker._rebase))
        cached = self.mu._cache.get(PID)
        return (
            looks,
            repr(self.nc.in_use(PID)),
            None if cached is None else (repr(cached[1]), repr(cached[3])),
        )


def _usual(rng: random.Random, old: list[int], n: int, dt: float, busy: bool, mem_moves: bool) -> list[int]:
    """The next counters of a busy (or idle) runtime: time and MACs within what a core can do, a few executions."""
    new = list(old)
    for core in range(n):
        base = core * L.NC_COUNTER_COUNT

        def add(counter: int, most: int, at: int = base) -> None:
            new[at + counter] = (new[at + counter] + rng.randint(1 if busy else 0, max(1, most))) % 2**64

        add(L.NC_TIME_IN_USE, int(dt * 1e6 * 0.9))
        add(L.NC_MAC_COUNT, int(dt * 1e12))
        add(L.NC_INFER_COMPLETED, 50)
        if rng.random() < 0.2:
            add(rng.choice([c for c in range(2, 13)]), 3)
        new[base + L.NC_LATENCY_DEVICE] = rng.choice([0, rng.randint(1, 10**6)])
        new[base + L.NC_LATENCY_TOTAL] = rng.choice([0, rng.randint(1, 10**6)])
        if mem_moves:
            for c in _MEM:
                new[base + c] = rng.randint(0, 2**34)
    return new


Step = tuple[float, list[tuple[int, int, int]], int, tuple[bool, bool, bool]]  # dt, forged values, kind, due
_DUE = [(True, True, True)] * 5 + [(True, False, True), (False, True, True), (True, True, False)]


@st.composite
def series(
    draw: st.DrawFn,
) -> tuple[Topology, int, list[tuple[float, list[tuple[int, int, int]], int, tuple[bool, bool, bool]]], int]:
    topology = draw(st.sampled_from((TRN2, TRN2, TRN1, TRN1, LNC2_NO_BREAKDOWN)))
    device = draw(st.integers(min_value=0, max_value=3))
    steps = []
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        dt = draw(st.sampled_from([0.1] * 6 + [0.05, 0.0, 1e-9, 3.0]))
        forged = draw(
            st.lists(
                st.tuples(
                    st.integers(min_value=0, max_value=topology.phys_cores - 1),
                    st.integers(min_value=0, max_value=L.NC_COUNTER_COUNT - 1),
                    _HOSTILE_VALUES,
                ),
                max_size=3,
            )
            if draw(st.integers(min_value=0, max_value=3)) == 0
            else st.just([])
        )
        kind = draw(st.integers(min_value=0, max_value=7))  # 0: idle, 1: memory moves, 2: models change, else busy
        due = draw(
            st.sampled_from([(True, True, True)] * 5 + [(True, False, True), (False, True, True), (True, True, False)])
        )
        steps.append((dt, forged, kind, due))
    return topology, device, steps, draw(st.integers(min_value=0, max_value=2**32))


def _model(slot: int, core: int, size: int) -> ModelRecord:
    return ModelRecord(7 + slot, slot, f"model{slot}", bytes([slot + 1]) * 16, core, slot, {0: size, 4: 64}, {1: size})


def _bodies(world: Groups, app: App, due: tuple[bool, bool, bool], native: bool) -> list[Any]:
    """One collection of the due groups for ``app``: through the compiled call when ``native`` and all are due
    (its twin when it declines), else each due group's own ``collect`` (as the scheduler does)."""
    if all(due):
        got: Any = collect_application_native(*world.all, app) if native else None
        if got is None:
            got = collect_application_careful(*world.all, app)
        return list(got)
    return [g.collect([app], []).get(PID) if d else "not due" for g, d in zip(world.all, due, strict=True)]


def _same(a: list[Any], b: list[Any]) -> None:
    assert [orjson.dumps(x) for x in a] == [orjson.dumps(x) for x in b]
    assert repr(a) == repr(b)  # the same types and floats, key order included


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(series())
# an execution count that jumps past its plausible rate (still under 2^53, where summary() takes any value): the
# counter rule refuses it in both, so the compiled call must decline (it applies execution_stats' limits too)
@example((TRN2, 0, [(0.1, [], 3, _DUE[0])] * 2 + [(0.1, [(1, L.NC_INFER_COMPLETED, 2**40)], 3, _DUE[0])], 1))
def test_one_compiled_call_per_application_equals_the_groups_own_paths(tmp_path_factory: Any, case: Any) -> None:
    topology, device, steps, seed = case
    rng = random.Random(seed)
    n = topology.phys_cores
    root = RootFS(str(tmp_path_factory.getbasetemp()))
    fast, ref = Groups(root), Groups(root)
    slab = bytearray(L.NDS_SIZE)
    writer = SlabWriter(memoryview(slab))
    writer.init_process(20000)
    writer.write_process_info("tag")
    writer.write_model(0, _model(0, 0, 1000))
    parser = BlockParser(n)
    t = 1000.0
    counters = [0] * (n * L.NC_COUNTER_COUNT)

    def write(values: list[int]) -> None:
        for core in range(n):
            for c in range(L.NC_COUNTER_COUNT):
                writer.set_nc(core, c, values[core * L.NC_COUNTER_COUNT + c])

    write(counters)
    first = parser.parse(bytes(slab), t)
    info = AppInfo(PID, 0, (), 0, 0)
    data = AppData(PID, topology)
    data.devices[device] = DeviceData(device, first, first.counters, t, info)
    app = App(PID, "tag", "", data, (device,))
    for dt, forged, kind, due in steps:
        t += dt
        counters = _usual(rng, counters, n, max(dt, 1e-3), kind != 0, kind == 1)
        for core, c, value in forged:
            counters[core * L.NC_COUNTER_COUNT + c] = value
        write(counters)
        if kind == 2:
            writer.write_model(1, _model(1, n - 1, rng.randint(1, 2**20)))
        reading: BlockReading = parser.parse(bytes(slab), t)
        counters = list(reading.counters)
        data.devices[device].reading = reading
        _same(_bodies(fast, app, due, True), _bodies(ref, app, due, False))
        assert fast.state() == ref.state()
    # the application departs: each group's final bodies and forgetting, as before
    finals = [[g.collect([], [app]).get(PID) for g in world.all] for world in (fast, ref)]
    _same(finals[0], finals[1])
    assert fast.state() == ref.state()


def _usual_series(topology: Topology, collections: int) -> tuple[Groups, App, list[Any]]:
    """A busy application read every 0.1 s through the compiled call: its groups and each collection's answer."""
    rng = random.Random(5)
    n = topology.phys_cores
    world = Groups(RootFS("/"))
    counters = [0] * (n * L.NC_COUNTER_COUNT)
    for core in range(n):
        counters[core * L.NC_COUNTER_COUNT + L.NC_MEM_TENSORS_DEVICE] = 4096
    slab = bytearray(L.NDS_SIZE)
    writer = SlabWriter(memoryview(slab))
    writer.init_process(20000)
    parser = BlockParser(n)
    answers = []
    data: AppData | None = None
    app: App | None = None
    for k in range(collections):
        for core in range(n):
            for c in range(L.NC_COUNTER_COUNT):
                writer.set_nc(core, c, counters[core * L.NC_COUNTER_COUNT + c])
        reading = parser.parse(bytes(slab), 100.0 + k * 0.1)
        if data is None:
            data = AppData(PID, topology)
            data.devices[1] = DeviceData(1, reading, reading.counters, reading.time, AppInfo(PID, 0, (), 0, 0))
            app = App(PID, "tag", "", data, (1,))
        data.devices[1].reading = reading
        assert app is not None
        answers.append(collect_application_native(*world.all, app))
        if answers[-1] is None:
            collect_application_careful(*world.all, app)
        counters = _usual(rng, counters, n, 0.1, True, False)
    assert app is not None
    return world, app, answers


@pytest.mark.parametrize("topology", [TRN2, TRN1], ids=["trn2", "trn1"])
def test_the_native_call_takes_a_busy_application_from_its_second_collection(topology: Topology) -> None:
    _, _, answers = _usual_series(topology, 4)
    assert answers[0] is None  # the first look counts from the birth baseline: the groups' own paths
    assert all(a is not None for a in answers[1:])
    in_use, summary, memory = answers[-1]
    assert in_use["period"] == 0.1 and summary["period"] == 0.1
    assert len(in_use["neuroncores_in_use"]) == topology.logical_cores
    assert memory is answers[-2][2]  # memory unchanged: memory_used's cached body, the same object


def test_the_native_call_declines_groups_collected_apart_and_a_second_device() -> None:
    world, app, _ = _usual_series(TRN2, 3)
    seen = world.es.tracker.looks(PID)
    assert seen is not None
    seen[1] = (seen[1][0], seen[1][1] - 0.5, None)  # execution_stats looked at another time than the others
    assert collect_application_native(*world.all, app) is None
    assert isinstance(app.data, AppData)
    app.data.devices[2] = app.data.devices[1]
    assert collect_application_native(*world.all, app) is None


def test_collect_applications_native_needs_all_three_groups() -> None:
    world, app, _ = _usual_series(TRN2, 2)
    groups = {g.type_name: g for g in world.all}
    assert set(collect_applications(groups, [app])) == set(application.NAMES)
    del groups["memory_used"]
    assert collect_applications(groups, [app]) == {}


def test_a_failing_native_call_leaves_the_application_to_the_groups_own_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    world, app, _ = _usual_series(TRN2, 3)
    assert isinstance(app.data, AppData)
    dd = app.data.devices[1]
    old = dd.reading
    cur = array("Q", old.counters)
    for core in range(TRN2.phys_cores):
        for counter, step in ((L.NC_TIME_IN_USE, 50_000), (L.NC_MAC_COUNT, 10**9), (L.NC_INFER_COMPLETED, 5)):
            cur[core * L.NC_COUNTER_COUNT + counter] += step
    dd.reading = BlockReading(old.time + 0.1, True, old.nd_values, cur, old.tag, old.models)
    looks = [dict(g.tracker.looks(PID) or {}) for g in world.all]
    cache = world.mu._cache[PID]

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    with monkeypatch.context() as patch:
        patch.setattr(world.mu, "body_after_step", broken)
        groups = {g.type_name: g for g in world.all}
        assert collect_applications(groups, [app]) == {name: {} for name in application.NAMES}
    # nothing stepped: each group's own collect then counts this interval
    assert [dict(g.tracker.looks(PID) or {}) for g in world.all] == looks
    assert world.mu._cache[PID] is cache
    bodies = collect_application_careful(*world.all, app)
    assert [b is not None and b.get("period") for b in bodies[:2]] == [0.1, 0.1]
