"""The pure-Python steps' shortcuts against the plain computation they stand for (issue 41 goal 3, pure mode).

- a delta step from the picks it kept of the previous reading gives what picking both readings again gives;
- `cores_careful`'s pair of physical cores (one dict display per logical core) gives what the mean and sum over
  the members' lists give, and written into its kept answer (`KeptPairs`) what building it anew gives;
- `summary_careful`'s values written into the application's kept nested dicts (`KeptSummary`) are what a body
  built anew holds;
- `usage_careful`'s rounded numbers, computed once per interval and tick count, are the direct rounding.
"""

from __future__ import annotations

from array import array
from typing import Any

import orjson
from hypothesis import event, given, settings
from hypothesis import strategies as st

from neuron_monitor.groups.execution_stats.collector import _INDICES as ES_INDICES
from neuron_monitor.groups.execution_stats.collector import KeptSummary, summary_careful
from neuron_monitor.groups.neuron_runtime_vcpu_usage.collector import _INTERVAL, _SHARES_MAX, CLOCK_TICKS, usage_careful
from neuron_monitor.groups.neuroncore_counters import body as B
from neuron_monitor.groups.neuroncore_counters.collector import MAX_MACS, KeptPairs, cores_careful
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.datablock import N
from neuron_monitor.neuron.deltas import Pick, device_deltas_careful, picker


@st.composite
def reading_pairs(draw: st.DrawFn) -> tuple[array[int], array[int], Pick]:
    cores = draw(st.integers(1, 8))
    contiguous = draw(st.booleans())
    if contiguous:  # execution_stats' shape: one frequent counter, then a run of rare ones
        lo = draw(st.integers(0, N - 2))
        hi = draw(st.integers(lo + 1, N))
        indices = (draw(st.integers(0, N - 1)), *range(lo, hi))
    else:
        indices = tuple(draw(st.lists(st.integers(0, N - 1), min_size=1, max_size=12)))
    often = draw(st.integers(1, len(indices)))
    prev = array("Q", draw(st.lists(st.integers(0, 10**6), min_size=cores * N, max_size=cores * N)))
    cur = array("Q", prev)
    for at in draw(st.lists(st.integers(0, cores * N - 1), max_size=6)):  # a few counters move (or go back)
        cur[at] = draw(st.integers(0, 2 * 10**6))
    return cur, prev, Pick(indices, often, cores)


DTS = st.sampled_from([None, 0.0, 0.05, 0.100289447, 1.0, 3600.0])


@settings(max_examples=400, deadline=None)
@given(reading_pairs(), DTS, st.booleans())
def test_kept_picks_give_what_picking_again_gives(
    case: tuple[array[int], array[int], Pick], dt: float | None, as_tuple: bool
) -> None:
    cur, prev, pick = case
    if as_tuple:  # a departed application's merged reading is a tuple
        prev = tuple(prev)  # type: ignore[assignment]
    kept = (pick.frequent(prev), pick.rare(prev))  # what the step kept when it looked at ``prev``
    with_kept = device_deltas_careful(cur, prev, pick, kept, dt)
    again = device_deltas_careful(cur, prev, pick, None, dt)
    assert with_kept == again  # the deltas (or the refused index) and this reading's picks, by value


@st.composite
def pair_steps(draw: st.DrawFn) -> tuple[list[Any], tuple[int, int, bool, str, tuple[str, ...]]]:
    pairs = draw(st.integers(1, 4))
    n = 2 * pairs
    dt = draw(st.sampled_from([0.0, 1e-6, 0.1, 0.100289447, 2.5]))
    busy = draw(st.lists(st.integers(1, 10**7), min_size=n, max_size=n))  # every core in use
    most = int(MAX_MACS * dt)
    macs = draw(st.lists(st.one_of(st.integers(0, 10**12), st.integers(most, most + 2)), min_size=n, max_size=n))
    breakdown = draw(st.booleans())
    shape = (2, pairs, breakdown, "v3d", ("nc_v3.0", "nc_v3.1") if breakdown else ())
    counters = array("Q", [0] * (n * N))
    dd: Any = type("DD", (), {"reading": type("R", (), {"counters": counters, "models": ()})()})()
    device = draw(st.integers(0, 3))
    return [(device, dd, dt, n, busy + macs)], shape


def _pairs_plainly(steps: list[Any], shape: tuple[int, int, bool, str, tuple[str, ...]]) -> dict[str, Any]:
    """The logical cores of pairs as the lists of members give them: mean of shares, sum of rates, breakdown."""
    _lnc, per_device, breakdown, group_name, phys_names = shape
    out: dict[str, Any] = {}
    for device, _dd, dt, n, deltas in steps:
        busy, macs = deltas[:n], deltas[n:]
        utils = [min(100.0, b / (dt * 1e4)) for b in busy] if dt > 0 else [0.0] * n
        flops = [int(2 * m / dt) if m <= MAX_MACS * dt else None for m in macs] if dt > 0 else [0] * n
        for k in range(n // 2):
            members = [2 * k, 2 * k + 1]
            shares = [utils[p] for p in members]
            rates = [flops[p] for p in members]
            entry: dict[str, Any] = {B.NEURONCORE_UTILIZATION: sum(shares) / len(shares)}
            if None not in rates:
                entry[B.FLOPS] = sum(r for r in rates if r is not None)
            if breakdown:
                entry[group_name] = {phys_names[p % 2]: {B.NEURONCORE_UTILIZATION: utils[p]} for p in members}
            out[str(device * per_device + k)] = entry
    return out


@settings(max_examples=300, deadline=None)
@given(pair_steps())
def test_cores_in_pairs_are_the_mean_and_sum_of_their_members(
    case: tuple[list[Any], tuple[int, int, bool, str, tuple[str, ...]]],
) -> None:
    steps, shape = case
    got, want = cores_careful(steps, shape), _pairs_plainly(steps, shape)
    assert repr(got) == repr(want)
    assert orjson.dumps(got) == orjson.dumps(want)


@st.composite
def step_runs(draw: st.DrawFn) -> list[tuple[list[Any], tuple[int, int, bool, str, tuple[str, ...]]]]:
    """One application's collections in turn: mostly the kept case of one shape, sometimes another (a core idle,
    a rate past what a core can do, no period, another device or core count, LNC=1, no breakdown)."""
    (base_steps, _), dt = draw(pair_steps()), draw(st.sampled_from([0.1, 0.100289447, 2.5]))
    device, dd, _dt, n, _deltas = base_steps[0]
    base = (device, dd, n, (2, n // 2, True, "v3d", ("nc_v3.0", "nc_v3.1")))
    runs = []
    for _ in range(draw(st.integers(2, 8))):
        if draw(st.integers(0, 3)) == 0:  # another shape altogether
            runs.append(draw(pair_steps()))
            continue
        device, dd, n, shape = base
        busy = [draw(st.integers(1, 10**7)) for _ in range(n)]
        macs = [draw(st.integers(0, int(MAX_MACS * dt))) for _ in range(n)]
        step_dt = dt
        if draw(st.integers(0, 5)) == 0:  # a core idle this period
            busy[0] = 0
        if draw(st.integers(0, 5)) == 0:  # a rate past what a core can do
            macs[-1] = int(MAX_MACS * dt) + 10
        if draw(st.integers(0, 7)) == 0:  # no period
            step_dt = 0.0
        if draw(st.integers(0, 7)) == 0:
            shape = (1, n, False, "v3d", ())
        runs.append(([(device, dd, step_dt, n, busy + macs)], shape))
    return runs


@settings(max_examples=300, deadline=None)
@given(step_runs())
def test_cores_written_into_the_kept_answer_are_the_cores_built_anew(
    runs: list[tuple[list[Any], tuple[int, int, bool, str, tuple[str, ...]]]],
) -> None:
    kept = KeptPairs()
    previous: dict[str, Any] | None = None
    written = 0
    for steps, shape in runs:
        want = cores_careful(steps, shape)
        key_before = kept.key if kept.answer is not None else None
        got = cores_careful(steps, shape, kept)
        assert repr(got) == repr(want)
        assert orjson.dumps(got) == orjson.dumps(want)
        _device, _dd, dt, n, deltas = steps[0]
        usual = shape[0] == 2 and shape[2] and dt > 0 and all(deltas[:n]) and max(deltas[n:]) <= MAX_MACS * dt
        if usual and previous is not None and key_before == (steps[0][0], n, shape):
            assert got is previous  # written into the kept dicts: none made
            written += 1
        assert (kept.answer is got) == usual
        previous = got
    event(f"written into the kept answer: {min(written, 3)}")


def _latencies(n: int) -> tuple[Any, Any]:
    return picker((L.NC_LATENCY_DEVICE,), n), picker((L.NC_LATENCY_TOTAL,), n)


@st.composite
def summary_steps(draw: st.DrawFn) -> list[Any]:
    """One collection's steps of an application: one device mostly, sometimes two; the rare counts changed or
    not (the deltas then stop after the frequent one); cores idle or not; latencies zero or not."""
    steps = []
    for device in range(draw(st.integers(1, 2)) if draw(st.integers(0, 4)) == 0 else 1):
        n = draw(st.integers(1, 8))
        rare = draw(st.booleans())
        counts = st.integers(0, 5) if draw(st.booleans()) else st.integers(1, 10**6)
        deltas = draw(st.lists(counts, min_size=n * (len(ES_INDICES) if rare else 1), max_size=n * len(ES_INDICES)))
        deltas = deltas[: n * (len(ES_INDICES) if rare else 1)]
        latency = st.one_of(st.just(0), st.integers(1, 10**7))
        counters = array("Q", [0] * (n * N))
        for core in range(n):
            counters[core * N + L.NC_LATENCY_DEVICE] = draw(latency)
            counters[core * N + L.NC_LATENCY_TOTAL] = draw(latency)
        dd: Any = type("DD", (), {"reading": type("R", (), {"counters": counters})()})()
        steps.append((device, dd, 0.1, n, deltas))
    return steps


@settings(max_examples=300, deadline=None)
@given(st.lists(summary_steps(), min_size=1, max_size=8))
def test_summaries_written_into_the_kept_dicts_are_the_summaries_built_anew(runs: list[list[Any]]) -> None:
    kept = KeptSummary()
    bodies = []
    for steps in runs:
        want = summary_careful(steps, _latencies)
        got = summary_careful(steps, _latencies, kept)
        assert repr(got) == repr(want)
        assert orjson.dumps(got) == orjson.dumps(want)
        assert all(got is not body for body in bodies)  # each body its own dict: never an unchanged body
        bodies.append(got)
    if len(runs) > 1:
        assert got["error_summary"] is bodies[0]["error_summary"]  # written into, not made again


def _pid_stat(utime: int, stime: int) -> bytes:
    fields = ["S", *["0"] * 10, str(utime), str(stime), *["0"] * 6, "12345", *["0"] * 20]
    return b"4242 (rt (x)) " + " ".join(fields).encode() + b"\n"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 10**6),
            st.integers(0, 40),
            st.integers(0, 40),
            st.sampled_from([0.1, 0.100289447, 0.2, 1e-3, 3.0]),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_runtime_usage_numbers_are_the_direct_rounding(samples: list[tuple[int, int, int, float]]) -> None:
    """Runtimes in turn with intervals repeating and changing: each body's numbers are round() of its own."""
    for before, user, system, dt in samples:
        body, utime, stime = usage_careful(_pid_stat(before + user, before + system), before, before, dt)
        want = {
            "period": round(dt, 9),
            "vcpu_usage": {
                "user": round(user / CLOCK_TICKS / dt * 100.0, 2),
                "system": round(system / CLOCK_TICKS / dt * 100.0, 2),
            },
        }
        assert repr(dict(body)) == repr(want)
        assert (utime, stime) == (before + user, before + system)


def test_the_rounded_numbers_kept_for_one_interval_stay_bounded() -> None:
    """However many tick counts one interval sees (a fixed clock, a host with thousands of runtimes), the memo of
    their rounded shares stays bounded (ground rule 5: memory bounded), and its numbers stay right."""
    dt = 0.1
    for ticks in range(5000):
        body, _, _ = usage_careful(_pid_stat(ticks, 2 * ticks), 0, 0, dt)
        assert body["vcpu_usage"]["user"] == round(ticks / CLOCK_TICKS / dt * 100.0, 2)
        assert body["vcpu_usage"]["system"] == round(2 * ticks / CLOCK_TICKS / dt * 100.0, 2)
    assert len(_INTERVAL.shares) <= _SHARES_MAX + 2
