"""neuroncore_counters: utilization and FLOPS from time-in-use and MAC deltas, flat core keys, the v3d breakdown;
the fast logical-core pass against its careful twin."""

from __future__ import annotations

import orjson
from hypothesis import event, given, settings
from hypothesis import strategies as st

from neuron_monitor.groups.neuroncore_counters.collector import (
    MAX_MACS,
    NeuroncoreCounters,
    cores_careful,
    cores_native,
)
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.native import NATIVE
from neuron_monitor.neuron.deltas import DeviceDelta
from tests.neuron.appdata import TRN1, TRN2, app_with, counters

MEM = {22: 4096}  # some device memory on the core: the app uses it


def test_utilization_and_flops_on_physical_cores() -> None:
    g = NeuroncoreCounters(RootFS("/"))
    a = app_with({0: counters({0: 0, 29: 0, **MEM}), 1: counters({**MEM})}, t=10.0, device=1, topology=TRN1)
    g.collect([a], [])
    b = app_with({0: counters({0: 500_000, 29: 10**9, **MEM}), 1: counters({**MEM})}, t=11.0, like=a, device=1)
    cores = g.collect([b], [])[b.pid]["neuroncores_in_use"]
    assert list(cores) == ["2", "3"]  # device 1 x 2 cores per device + local core
    assert cores["2"] == {"neuroncore_utilization": 50.0, "flops": 2 * 10**9}
    assert cores["3"] == {"neuroncore_utilization": 0.0, "flops": 0}


def test_logical_cores_average_physical_and_show_v3d() -> None:
    g = NeuroncoreCounters(RootFS("/"))
    start = {c: counters({**MEM}) for c in range(8)}
    a = app_with(start, t=0.0, topology=TRN2)
    g.collect([a], [])
    later = dict(start)
    later[2] = counters({0: 200_000, 29: 100, **MEM})  # logical core 1 = physical 2 and 3
    later[3] = counters({0: 600_000, 29: 300, **MEM})
    b = app_with(later, t=1.0, like=a)
    cores = g.collect([b], [])[b.pid]["neuroncores_in_use"]
    assert list(cores) == ["0", "1", "2", "3"]
    one = cores["1"]
    assert one["neuroncore_utilization"] == 40.0
    assert one["flops"] == 800
    assert one["v3d"] == {"nc_v3.0": {"neuroncore_utilization": 20.0}, "nc_v3.1": {"neuroncore_utilization": 60.0}}


def test_gone_app_reports_final_counts_once_and_is_forgotten() -> None:
    g = NeuroncoreCounters(RootFS("/"))
    a = app_with({0: counters({**MEM})}, t=0.0)
    g.collect([a], [])
    final = app_with({0: counters({0: 250_000, **MEM})}, t=0.5, like=a)
    out = g.collect([], [final])
    assert out[a.pid]["neuroncores_in_use"]["0"]["neuroncore_utilization"] == 50.0
    assert g._tracker._prev == {}


@st.composite
def _device_steps(draw: st.DrawFn) -> tuple[list[DeviceDelta], tuple[int, int, bool, str, tuple[str, ...]]]:
    """One device's deltas as DeltaTracker.step gives them, with a topology shape; edges included (zero busy,
    odd core counts, no period, huge counts, LNC 1 and chips without a breakdown)."""
    usual = draw(st.booleans())  # half the cases in the fast pass's domain: LNC 2, a breakdown, cores in pairs
    n = draw(st.integers(1, 8)) * 2 if usual else draw(st.integers(1, 16))
    lnc = 2 if usual else draw(st.sampled_from([1, 2, 4]))
    breakdown = usual or (lnc > 1 and draw(st.booleans()))
    names = tuple(f"nc_v3.{i}" for i in range(lnc)) if breakdown else ()
    device = draw(st.integers(0, 63))
    some = (
        st.integers(1, 2 * 10**7) if usual or draw(st.booleans()) else st.one_of(st.just(0), st.integers(1, 2 * 10**7))
    )
    busy = draw(st.lists(some, min_size=n, max_size=n))
    macs = draw(st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n))
    dt = draw(st.sampled_from([0.0, 1e-9, 0.1, 0.100289447, 1.0, 300.0]))
    mem = {c: counters({22: 4096}) if draw(st.booleans()) else counters({}) for c in range(n)}
    app = app_with(mem, t=1.0, device=device, topology=TRN2)
    dd = app.data.devices[device]
    return [(device, dd, dt, n, busy + macs)], (lnc, max(1, n // lnc), breakdown, "v3d", names)


@settings(max_examples=400, deadline=None)
@given(_device_steps())
def test_the_native_pass_gives_what_its_careful_twin_does(
    case: tuple[list[DeviceDelta], tuple[int, int, bool, str, tuple[str, ...]]],
) -> None:
    steps, shape = case
    native = cores_native(steps, shape)
    if native is not None:  # the compiled helper (tests/test_native.py checks it is built where it can be)
        event("native pass answered")
        assert repr(native) == repr(cores_careful(steps, shape))
        assert orjson.dumps(native) == orjson.dumps(cores_careful(steps, shape))


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 8),
    st.integers(0, 63),
    st.data(),
    st.sampled_from([1e-9, 0.1, 0.100289447, 1.0, 300.0, float("nan")]),
)
def test_the_native_pass_on_trn2_steps_within_its_range(
    cores: int, device: int, data: st.DataObject, dt: float
) -> None:
    """The usual Trn2 case (busy cores in pairs) with counts around the helper's limits: 2^53 and MAX_MACS."""
    n = 2 * cores
    value = st.one_of(st.integers(0, 10**13), st.integers(2**53 - 3, 2**53 + 3), st.just(0))
    deltas = data.draw(st.lists(value, min_size=2 * n, max_size=2 * n))
    app = app_with({c: counters({22: 4096}) for c in range(n)}, t=1.0, device=device, topology=TRN2)
    steps: list[DeviceDelta] = [(device, app.data.devices[device], dt, n, deltas)]
    shape = (2, 4, True, "v3d", ("nc_v3.0", "nc_v3.1"))
    native = cores_native(steps, shape)
    if native is not None:
        event("native pass answered")
        assert repr(native) == repr(cores_careful(steps, shape))


def test_the_native_pass_at_the_mac_limit_gives_what_its_careful_twin_does() -> None:
    """MAC deltas at and just past what a core can do in the period (MAX_MACS x dt; the tracker's own bound is
    wider for short periods): past it the careful twin leaves the core's FLOPS out, so the helper must decline."""
    app = app_with({c: counters({22: 4096}) for c in range(2)}, t=1.0, device=0, topology=TRN2)
    shape = (2, 4, True, "v3d", ("nc_v3.0", "nc_v3.1"))
    for dt in (1e-9, 1e-6, 1e-3, 0.01):
        edge = int(MAX_MACS * dt)
        for macs in ([edge, edge], [edge - 1, edge + 1], [edge, int(edge * 1.2)], [int(edge * 1.4), 1]):
            steps: list[DeviceDelta] = [(0, app.data.devices[0], dt, 2, [1000, 2000, *macs])]
            native = cores_native(steps, shape)
            if native is not None:
                assert repr(native) == repr(cores_careful(steps, shape))
            elif NATIVE is not None:
                assert max(macs) > MAX_MACS * dt  # declined only past the limit


def test_the_native_pass_takes_the_usual_trn2_case() -> None:
    start = {c: counters({**MEM}) for c in range(8)}
    g = NeuroncoreCounters(RootFS("/"))
    g._tracker.step(app_with(start, t=0.0, topology=TRN2))
    steps = g._tracker.step(app_with({c: counters({0: 50_000 + c, 29: 10**12 + c, **MEM}) for c in range(8)}, t=0.1))
    shape = g._shape_of(TRN2)
    if NATIVE is not None:
        assert cores_native(steps, shape) is not None
        assert orjson.dumps(cores_native(steps, shape)) == orjson.dumps(cores_careful(steps, shape))
    else:
        assert cores_native(steps, shape) is None


def test_a_damaged_mac_counter_makes_the_runtimes_object_an_error_and_the_report_encodes() -> None:
    """A MAC counter that jumps past what a core can count (here 2^64-1 in 0.1 s) is the runtime's group error
    for the period (neuron/plausible.py), never a rate; the next reading is a new baseline (the counter rule,
    util/counters.py: nothing counted from the damaged reading), the one after counts."""
    start = {c: counters({**MEM}) for c in range(8)}
    g = NeuroncoreCounters(RootFS("/"))
    g.collect([app_with(start, t=0.0, topology=TRN2)], [])
    jump = {c: counters({0: 50_000, 29: (2**64 - 1 if c == 3 else 10**12), **MEM}) for c in range(8)}
    body = g.collect([app_with(jump, t=0.1)], [])
    (only,) = body.values()
    assert set(only) == {"error"}
    assert "neuron0 core 3: MAC count grew by 18446744073709551615" in only["error"]
    orjson.dumps(only)
    later = {c: counters({0: 100_000, 29: (2**64 - 1 if c == 3 else 2 * 10**12), **MEM}) for c in range(8)}
    (baseline,) = g.collect([app_with(later, t=0.2)], []).values()
    assert "error" not in baseline and not baseline.get("neuroncores_in_use", {}).get("1", {}).get("flops")
    latest = {c: counters({0: 150_000, 29: (2**64 - 1 if c == 3 else 3 * 10**12), **MEM}) for c in range(8)}
    (after,) = g.collect([app_with(latest, t=0.3)], []).values()
    assert "error" not in after and after["neuroncores_in_use"]["1"]["flops"] == 2 * 10**13 * 1


def test_cores_careful_still_leaves_a_rate_past_max_flops_out() -> None:
    """Defence in depth for deltas that reach the shaping step directly (the tracker bounds them first)."""
    start = {c: counters({**MEM}) for c in range(8)}
    g = NeuroncoreCounters(RootFS("/"))
    g._tracker.step(app_with(start, t=0.0, topology=TRN2))
    steps = g._tracker.step(app_with({c: counters({0: 50_000, 29: 10**12, **MEM}) for c in range(8)}, t=0.1))
    device, dd, dt, n, deltas = steps[0]
    deltas = list(deltas)
    deltas[n + 3] = 2**64 - 1
    damaged: list[DeviceDelta] = [(device, dd, dt, n, deltas)]
    shape = g._shape_of(TRN2)
    assert cores_native(damaged, shape) is None
    cores = cores_careful(damaged, shape)
    assert "flops" not in cores["1"]  # logical core 1 holds physical core 3
    assert all(cores[k]["flops"] == 2 * 10**13 * 2 for k in ("0", "2", "3"))
    orjson.dumps(cores)


# -- neuroncores_in_use updated in place (cores_native's reuse) ----------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([4, 8, 8, 8]),  # physical cores in use: a change of shape makes a new dict
            st.lists(st.integers(0, 10**6), min_size=8, max_size=8),  # time in use (0: a core not busy)
            st.lists(st.integers(0, 10**12), min_size=8, max_size=8),  # MACs
            st.sampled_from([0.1, 0.100289447, 5.0]),
        ),
        min_size=2,
        max_size=6,
    )
)
def test_a_reused_in_use_dict_holds_what_a_fresh_one_would(
    collections: list[tuple[int, list[int], list[int], float]],
) -> None:
    """Collection after collection, the body equals (repr and JSON bytes) what a group that never reuses builds
    from the same readings, whether the helper updated last collection's dict in place or built a new one."""
    g, fresh = NeuroncoreCounters(RootFS("/")), NeuroncoreCounters(RootFS("/"))
    busy, macs, t, cores_now = [0] * 8, [0] * 8, 1.0, 8
    app = app_with({c: counters({**MEM}) for c in range(8)}, t=t, topology=TRN2)
    reused = 0
    for cores, busy_step, mac_step, dt in [(8, [0] * 8, [0] * 8, 0.1), *collections]:
        t += dt
        busy = [b + s for b, s in zip(busy, busy_step, strict=True)]
        macs = [m + s for m, s in zip(macs, mac_step, strict=True)]
        flat = {c: counters({0: busy[c], 29: macs[c], **MEM}) for c in range(cores)}
        # the same block again, or another block size (the app's reading then has other cores)
        app = app_with(flat, t=t, like=app if cores == cores_now else None, topology=TRN2)
        cores_now = cores
        before = g._in_use.get(1234)
        body = g.collect([app], [])[1234]
        fresh._in_use.clear()  # the twin never has a dict to reuse
        want = fresh.collect([app], [])[1234]
        assert repr(body) == repr(want)
        assert orjson.dumps(body) == orjson.dumps(want)
        reused += before is not None and body["neuroncores_in_use"] is before
    event("updated in place" if reused else "built anew each time")


def test_the_helper_reuses_only_a_dict_of_the_same_shape() -> None:
    if NATIVE is None:
        return
    shape = (2, 4, True, "v3d", ("nc_v3.0", "nc_v3.1"))
    app = app_with({c: counters({**MEM}) for c in range(8)}, t=1.0, topology=TRN2)
    deltas = [1000 + c for c in range(8)] + [10**9] * 8
    steps: list[DeviceDelta] = [(0, app.data.devices[0], 0.1, 8, deltas)]
    first = cores_native(steps, shape)
    assert first is not None
    again = cores_native([(0, app.data.devices[0], 0.2, 8, [2000] * 8 + [10**9] * 8)], shape, first)
    assert again is first and orjson.dumps(again) == orjson.dumps(
        cores_careful([(0, app.data.devices[0], 0.2, 8, [2000] * 8 + [10**9] * 8)], shape)
    )
    for other in ({}, {"0": first["0"]}, {k: first[k] for k in reversed(list(first))}, {**first, "9": {}}):
        got = cores_native(steps, shape, other)
        assert got is not other and orjson.dumps(got) == orjson.dumps(cores_careful(steps, shape))
    broken = orjson.loads(orjson.dumps(first))
    del broken["3"]["v3d"]["nc_v3.1"]
    broken["3"]["v3d"]["x"] = {"neuroncore_utilization": 0.0}
    assert cores_native(steps, shape, broken) is not broken


def test_the_native_pass_takes_the_usual_trn1_case_and_reuses_its_dict() -> None:
    """LNC=1 (Trn1: cores not grouped): every core busy is the helper's case, each core its own entry; the dict it
    returned is updated in place next time when it has the same cores, never when another shape is given."""
    g = NeuroncoreCounters(RootFS("/"))
    g._tracker.step(app_with({c: counters({**MEM}) for c in range(2)}, t=0.0, device=3, topology=TRN1))
    steps = g._tracker.step(
        app_with({c: counters({0: 50_000 + c, 29: 10**12 + c, **MEM}) for c in range(2)}, t=0.1, device=3)
    )
    shape = g._shape_of(TRN1)
    assert shape[0] == 1
    native = cores_native(steps, shape)
    if NATIVE is None:
        assert native is None
        return
    assert native is not None and list(native) == ["6", "7"]
    assert orjson.dumps(native) == orjson.dumps(cores_careful(steps, shape))
    device, dd, _dt, n, _deltas = steps[0]
    later: list[DeviceDelta] = [(device, dd, 0.2, n, [70_000, 1, 5 * 10**11, 0])]
    again = cores_native(later, shape, native)
    assert again is native and repr(again) == repr(cores_careful(later, shape))
    for other in ({}, {"6": native["6"]}, {k: native[k] for k in reversed(list(native))}, {**native, "9": {}}):
        got = cores_native(later, shape, other)
        assert got is not other and orjson.dumps(got) == orjson.dumps(cores_careful(later, shape))
    idle: list[DeviceDelta] = [(device, dd, 0.2, n, [0, 1, 0, 0])]  # a core not busy: the twin decides
    assert cores_native(idle, shape) is None
