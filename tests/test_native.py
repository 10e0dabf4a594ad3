"""The compiled helper (neuron_monitor/_native.c) against its careful Python twins, on well-formed and hostile input.

Every function of the helper returns either None (the caller then runs the careful twin) or exactly what the twin
returns, whatever the bytes: truncated and damaged /proc/stat samples, huge numbers, counters that went back, short
or mistyped counter arrays, positions out of range. When a C compiler is present the helper must have been built:
these tests then fail rather than skip, so that an install that silently lost it cannot pass.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import sysconfig
from array import array
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_monitor.groups.vcpu_usage.collector import usage_body_careful
from neuron_monitor.host.procfs import parse_stat
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.datablock import N
from neuron_monitor.neuron.deltas import (
    _MEM,
    Pick,
    device_deltas_careful,
    memory_same,
    memory_same_careful,
    memory_same_native,
)
from neuron_monitor.util.counters import step as counter_step

COMPILER = shutil.which(sysconfig.get_config_var("CC").split()[0] if sysconfig.get_config_var("CC") else "cc")
HEADERS = (Path(sysconfig.get_paths()["include"]) / "Python.h").exists()


def _helper() -> ModuleType:
    """The built helper; a failure when a compiler and the headers are here (it should have been built), a skip
    only where it cannot be built; a skip in the suite's pure-Python mode (tests/conftest.py), where these tests,
    which call the helper itself, have nothing to add."""
    if os.environ.get("NEURON_MONITOR_NO_NATIVE"):
        pytest.skip("pure-Python mode: the helper is not used")
    try:
        return importlib.import_module("neuron_monitor._native")
    except ImportError as e:
        if COMPILER and HEADERS:
            pytest.fail(f"a C compiler ({COMPILER}) and Python.h are here but neuron_monitor._native is missing: {e}")
        pytest.skip("no C compiler here: the pure-Python twins run")


def test_helper_is_built_where_a_compiler_is_present() -> None:
    assert _helper().__file__


def test_native_loader_honours_the_opt_out(monkeypatch: pytest.MonkeyPatch) -> None:
    import neuron_monitor.native as native

    monkeypatch.setenv("NEURON_MONITOR_NO_NATIVE", "1")
    assert native._load() is None
    monkeypatch.delenv("NEURON_MONITOR_NO_NATIVE")
    assert native._load() is _helper()


# -- /proc/stat ----------------------------------------------------------------------------------------------


def stat_bytes(total: list[int], cpus: list[tuple[int, list[int]]], ctxt: int | str, agg_sep: str = "  ") -> bytes:
    lines = ["cpu" + agg_sep + " ".join(map(str, total))]
    lines += [f"cpu{cpu} " + " ".join(map(str, vals)) for cpu, vals in cpus]
    lines += ["intr 12 0 0 3 4", f"ctxt {ctxt}", "btime 1700000000", "processes 42", ""]
    return "\n".join(lines).encode()


def careful(prev: bytes, cur: bytes) -> dict[str, Any] | None:
    """The careful pipeline: the Python parse of both samples, then usage_body_careful (None if a parse fails)."""
    try:
        a, b = parse_stat(prev), parse_stat(cur)
    except ValueError:
        return None
    return usage_body_careful(a, b)


def check_stat_pair(prev: bytes, cur: bytes) -> dict[str, Any] | None:
    got: dict[str, Any] | None = _helper().vcpu_usage(prev, cur)
    if got is not None:
        want = careful(prev, cur)
        assert want is not None, "the helper accepted a sample the careful parse refuses"
        assert got == want
        assert orjson.dumps(got) == orjson.dumps(want)
    return got


_value = st.one_of(
    st.integers(0, 2**20), st.integers(0, 2**44), st.integers(2**44 - 4, 2**44 + 4), st.integers(0, 2**70)
)


@st.composite
def stat_pairs(draw: st.DrawFn) -> tuple[bytes, bytes, bool]:
    """Two samples of one host (the same vCPU ids, in a random order, possibly with gaps), every counter moving by
    a small amount either way (a counter going back happens on hot-unplug), plus whether every value stays within
    the helper's range (then it must not decline)."""
    cols = draw(st.integers(8, 11))
    ids = draw(st.lists(st.integers(0, 5000), min_size=1, max_size=12, unique=True))
    rows = [[draw(_value) for _ in range(cols)] for _ in ids]
    total = [draw(_value) for _ in range(cols)]
    moves = st.integers(-3, 400)
    rows2 = [[max(0, v + draw(moves)) for v in row] for row in rows]
    total2 = [max(0, v + draw(moves)) for v in total]
    ctxt = draw(st.integers(0, 2**40))
    ctxt2 = max(0, ctxt + draw(st.integers(-5, 10**6)))
    sep = draw(st.sampled_from([" ", "  ", "   "]))
    prev = stat_bytes(total, list(zip(ids, rows, strict=True)), ctxt, sep)
    cur = stat_bytes(total2, list(zip(ids, rows2, strict=True)), ctxt2, sep)
    small = all(v <= 2**44 for r in (*rows, *rows2, total, total2) for v in r)
    return prev, cur, small


@settings(max_examples=400, deadline=None)
@given(stat_pairs())
def test_vcpu_usage_equals_the_careful_twin(pair: tuple[bytes, bytes, bool]) -> None:
    prev, cur, small = pair
    got = check_stat_pair(prev, cur)
    if small:
        assert got is not None, "the helper declined a well-formed pair"


def test_vcpu_usage_declines_a_changed_vcpu_set_and_big_values() -> None:
    a = stat_bytes([1] * 10, [(0, [1] * 10), (1, [2] * 10)], 5)
    b = stat_bytes([9] * 10, [(0, [3] * 10), (2, [4] * 10)], 9)
    assert _helper().vcpu_usage(a, b) is None
    c = stat_bytes([2**45] * 10, [(0, [1] * 10), (1, [2] * 10)], 5)
    assert _helper().vcpu_usage(a, c) is None
    assert check_stat_pair(a, stat_bytes([3] * 10, [(0, [1] * 10), (1, [9] * 10)], 7)) is not None


def test_vcpu_usage_on_the_192_vcpu_fixture(fake_root_192: Path) -> None:
    data = (fake_root_192 / "proc" / "stat").read_bytes()
    got = check_stat_pair(data, data.replace(b"cpu0 ", b"cpu0 1"))
    assert got is not None and len(got["usage_data"]) == 192


@st.composite
def damaged(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` truncated, with bytes replaced, inserted or deleted (from an alphabet close to the layout)."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["cut", "set", "insert", "delete"]))
        at = draw(st.integers(0, max(0, len(out) - 1)))
        byte = draw(st.sampled_from(list(b"cpu \n0123456789-+_\t\x00\xffintrctx")))
        if kind == "cut":
            del out[at:]
        elif kind == "set" and out:
            out[at] = byte
        elif kind == "insert":
            out.insert(at, byte)
        elif out:
            del out[at]
    return bytes(out)


_GOOD = stat_bytes([10] * 10, [(0, [1] * 10), (1, [2] * 10), (2, [3] * 10)], 100)
_GOOD2 = stat_bytes([20] * 10, [(0, [5] * 10), (1, [2] * 10), (2, [9] * 10)], 140)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged(_GOOD), damaged(_GOOD2), st.booleans())
def test_vcpu_usage_on_damaged_samples_is_none_or_the_careful_result(a: bytes, b: bytes, swap: bool) -> None:
    check_stat_pair(_GOOD if swap else a, b)
    check_stat_pair(a, _GOOD2 if swap else b)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.binary(max_size=300))
def test_vcpu_usage_on_any_bytes_never_crashes(a: bytes, b: bytes) -> None:
    check_stat_pair(a, b)
    check_stat_pair(_GOOD, b)
    check_stat_pair(a + _GOOD, _GOOD2)


def test_vcpu_usage_refuses_wrong_argument_types() -> None:
    with pytest.raises(TypeError):
        _helper().vcpu_usage("cpu", b"")
    with pytest.raises(TypeError):
        _helper().vcpu_usage(b"")


# -- one device's deltas -----------------------------------------------------------------------------------


@st.composite
def delta_cases(draw: st.DrawFn) -> tuple[array[int], array[int], Pick]:
    cores = draw(st.integers(1, 16))
    indices = tuple(draw(st.lists(st.integers(0, N - 1), min_size=1, max_size=12)))
    often = draw(st.integers(1, len(indices)))
    big = st.one_of(st.integers(0, 2**64 - 1), st.integers(0, 1000), st.sampled_from([0, 2**63, 2**64 - 1]))
    cur = array("Q", draw(st.lists(big, min_size=cores * N, max_size=cores * N)))
    if draw(st.booleans()):  # mostly moving forward, rare counters unchanged, some going back
        moved = [v if draw(st.booleans()) else v - draw(st.integers(-5, 10**6)) for v in cur]
        prev = array("Q", [min(max(v, 0), 2**64 - 1) for v in moved])
    else:
        prev = array("Q", draw(st.lists(big, min_size=cores * N, max_size=cores * N)))
    return cur, prev, Pick(indices, often, cores)


@settings(max_examples=400, deadline=None)
@given(delta_cases())
def test_deltas_equal_the_careful_twin(case: tuple[array[int], array[int], Pick]) -> None:
    cur, prev, pick = case
    got = _helper().deltas(cur, prev, pick.positions, pick.often)
    assert got == device_deltas_careful(cur, prev, pick)[0]


DTS = st.sampled_from([0.0, 1e-6, 0.05, 0.100289447, 1.0, 5.0, 3600.0, 1e7])


@settings(max_examples=400, deadline=None)
@given(delta_cases(), DTS)
def test_deltas_with_limits_equal_the_careful_twin(case: tuple[array[int], array[int], Pick], dt: float) -> None:
    """With limits, the helper and the twin agree on the deltas or on the index of the first implausible one."""
    cur, prev, pick = case
    got = _helper().deltas(cur, prev, pick.positions, pick.often, pick.limits, dt, pick.tops)
    assert got == device_deltas_careful(cur, prev, pick, None, dt)[0]


@settings(max_examples=300, deadline=None)
@given(delta_cases(), DTS)
def test_deltas_with_limits_are_the_counter_rule(case: tuple[array[int], array[int], Pick], dt: float) -> None:
    """Both twins give, position by position, what util/counters.py's `step` gives (the one rule): the deltas
    where it counts, or the first position it refuses."""
    cur, prev, pick = case
    got = device_deltas_careful(cur, prev, pick, None, dt)[0]
    want: list[int] = []
    take = len(pick.positions) if any(cur[at] != prev[at] for at in pick.positions[pick.often :]) else pick.often
    for k in range(take):
        at = pick.positions[k]
        count, _, problem = counter_step(prev[at], cur[at], dt, pick.sources[k // pick.cores])
        if problem is not None or count is None:
            assert got == k
            return
        want.append(count)
    assert got == want


def test_deltas_count_a_reset_and_a_proven_mac_wrap() -> None:
    """A counter that went back counts its new value; the MAC count across 2^64 counts its step (both twins)."""
    pick = Pick((L.NC_INFER_COMPLETED, L.NC_MAC_COUNT), 2, 1)
    prev = array("Q", [0] * N)
    cur = array("Q", [0] * N)
    prev[L.NC_INFER_COMPLETED], cur[L.NC_INFER_COMPLETED] = 500, 7
    prev[L.NC_MAC_COUNT], cur[L.NC_MAC_COUNT] = 2**64 - 100, 50
    for got in (_helper().deltas(cur, prev, pick.positions, pick.often, pick.limits, 1.0, pick.tops),
                device_deltas_careful(cur, prev, pick, None, 1.0)[0]):  # fmt: skip
        assert got == [7, 150]


def test_a_mac_step_across_2_64_longer_than_2_60_is_a_reset_not_a_wrap() -> None:
    """A wrap is proven only for a step across the top of at most 2^60 (and within the rate): over a long period
    a larger one would be within the rate, yet both twins count it as a reset (its new value)."""
    pick = Pick((L.NC_MAC_COUNT,), 1, 1)
    prev = array("Q", [0] * N)
    cur = array("Q", [0] * N)
    prev[L.NC_MAC_COUNT], cur[L.NC_MAC_COUNT] = 2**64 - 2**60, 2**59  # 2^60 + 2^59 across the top
    for got in (_helper().deltas(cur, prev, pick.positions, pick.often, pick.limits, 3600.0, pick.tops),
                device_deltas_careful(cur, prev, pick, None, 3600.0)[0]):  # fmt: skip
        assert got == [2**59]


@st.composite
def edge_cases(draw: st.DrawFn) -> tuple[array[int], array[int], Pick, float]:
    """Deltas at, just under and just over each counter's bound (where the comparison as a double matters)."""
    cores = draw(st.integers(1, 4))
    indices = tuple(draw(st.lists(st.sampled_from([0, 1, 2, 7, 27, 28, 29, 13]), min_size=1, max_size=5)))
    pick = Pick(indices, draw(st.integers(1, len(indices))), cores)
    dt = draw(DTS)
    prev = array("Q", draw(st.lists(st.integers(0, 2**40), min_size=cores * N, max_size=cores * N)))
    cur = array("Q", prev)
    for k, counter in enumerate(indices):
        bound = pick.sources[k].bound(dt)
        for core in range(cores):
            near = int(bound) + draw(st.integers(-3, 3)) if draw(st.booleans()) else draw(st.integers(0, int(bound)))
            at = core * N + counter
            cur[at] = min(2**64 - 1, prev[at] + max(0, near))
    return cur, prev, pick, dt


@settings(max_examples=400, deadline=None)
@given(edge_cases())
def test_deltas_at_the_bounds_equal_the_careful_twin(case: tuple[array[int], array[int], Pick, float]) -> None:
    cur, prev, pick, dt = case
    got = _helper().deltas(cur, prev, pick.positions, pick.often, pick.limits, dt, pick.tops)
    assert got == device_deltas_careful(cur, prev, pick, None, dt)[0]


def test_deltas_with_limits_decline_bad_limits_or_dt() -> None:
    helper = _helper()
    pick = Pick((0, 12), 1, 2)
    a = array("Q", range(2 * N))
    assert helper.deltas(a, a, pick.positions, pick.often, pick.limits, 1.0, pick.tops) == [0, 0]
    assert helper.deltas(a, a, pick.positions, pick.often, pick.limits[:-1], 1.0, pick.tops) is None
    assert helper.deltas(a, a, pick.positions, pick.often, array("f", pick.limits), 1.0, pick.tops) is None
    assert helper.deltas(a, a, pick.positions, pick.often, pick.limits, 1, pick.tops) is None  # an int dt
    assert helper.deltas(a, a, pick.positions, pick.often, pick.limits, -1.0, pick.tops) is None
    assert helper.deltas(a, a, pick.positions, pick.often, pick.limits, float("nan"), pick.tops) is None
    assert helper.deltas(a, a, pick.positions, pick.often, pick.limits, float("inf"), pick.tops) is None
    assert helper.deltas(a, a, pick.positions, pick.often, b"x" * 32, 1.0, pick.tops) is None
    assert helper.deltas(a, a, pick.positions, pick.often, pick.limits, 1.0, pick.tops[:-1]) is None
    assert helper.deltas(a, a, pick.positions, pick.often, pick.limits, 1.0, array("d", pick.tops)) is None
    with pytest.raises(TypeError):  # limits without tops
        helper.deltas(a, a, pick.positions, pick.often, pick.limits, 1.0)
    b = array("Q", a)
    b[0] = 2**64 - 1  # core 0's TIME_IN_USE jumps past an hour of microseconds
    assert helper.deltas(b, a, pick.positions, pick.often, pick.limits, 1.0, pick.tops) == 0
    assert device_deltas_careful(b, a, pick, None, 1.0)[0] == 0


def test_deltas_decline_what_is_not_two_arrays_of_one_length() -> None:
    helper = _helper()
    pick = Pick((0, 12), 1, 2)
    a = array("Q", range(2 * N))
    assert helper.deltas(a, a, pick.positions, pick.often) == [0, 0]
    assert helper.deltas(tuple(a), a, pick.positions, pick.often) is None
    assert helper.deltas(a, a[:-1], pick.positions, pick.often) is None
    assert helper.deltas(a, array("q", a), pick.positions, pick.often) is None
    assert helper.deltas(a, a, array("i", pick.positions), pick.often) is None
    assert helper.deltas(a, a, array("I", [2 * N]), 1) is None  # a position past the end
    assert helper.deltas(a[:N], a[:N], pick.positions, pick.often) is None  # positions of 2 cores, 1 core read
    assert helper.deltas(a, a, pick.positions, 5) is None
    assert helper.deltas(a, a, pick.positions, -1) is None
    assert helper.deltas(a, a, pick.positions, 2**80) is None
    assert helper.deltas(b"x" * 8, b"y" * 8, array("I", [0]), 1) is None  # bytes are not unsigned 64-bit ints
    with pytest.raises(TypeError):
        helper.deltas(a, a, pick.positions)


class _Stand:
    """An object that looks like an array to the limited API's buffer stand-in (typecode or format, itemsize,
    tobytes), each part of which can be made to fail."""

    def __init__(self, items: array[int], **parts: Any) -> None:
        self._items = items
        self._parts = parts

    def __getattr__(self, name: str) -> Any:
        if name not in self._parts:
            raise AttributeError(name)
        part = self._parts[name]
        if isinstance(part, type) and issubclass(part, BaseException):
            raise part(name)  # a new exception each time (a kept one's traceback would hold this object)
        return part

    def tobytes(self) -> Any:
        part = self._parts.get("tobytes", self._items.tobytes())
        if isinstance(part, type) and issubclass(part, BaseException):
            raise part("tobytes")
        return part


def test_deltas_take_a_memoryview_as_its_array_and_decline_broken_stand_ins_without_a_leak() -> None:
    """The buffer stand-in (nm_get_buffer, c6686db) on what is not an array: a memoryview of an array is read as
    the array; an object whose typecode, format, itemsize or tobytes fails or lies is declined (None, no
    exception), or read as the array it claims to be where that is what it holds; no reference is leaked."""
    helper = _helper()
    pick = Pick((0, 12), 1, 2)
    a = array("Q", range(2 * N))
    b = array("Q", (v + 3 for v in a))
    want = helper.deltas(b, a, pick.positions, pick.often)
    assert want == [3] * len(want) and want
    assert helper.deltas(memoryview(b), memoryview(a), pick.positions, pick.often) == want
    assert helper.deltas(b, a, memoryview(pick.positions), pick.often) == want
    broken = [
        _Stand(b, typecode=RuntimeError),
        _Stand(b, typecode=AttributeError, format=ValueError),
        _Stand(b),  # neither typecode nor format
        _Stand(b, typecode="QQ", itemsize=8),
        _Stand(b, typecode=b"Q", itemsize=8),
        _Stand(b, typecode=7, itemsize=8),
        _Stand(b, typecode="\udcff", itemsize=8),
        _Stand(b, typecode="Q", itemsize=0),
        _Stand(b, typecode="Q", itemsize=-8),
        _Stand(b, typecode="Q", itemsize=2**80),
        _Stand(b, typecode="Q", itemsize="8"),
        _Stand(b, typecode="Q", itemsize=OverflowError),
        _Stand(b, typecode="Q", itemsize=8, tobytes=MemoryError),
        _Stand(b, typecode="Q", itemsize=8, tobytes="not bytes"),
        _Stand(b, typecode="Q", itemsize=8, tobytes=b"\0" * 7),
        _Stand(b, typecode="Q", itemsize=8, tobytes=b""),
        _Stand(b, format="Q", itemsize=8),  # a well-formed stand-in: the array it holds, where it is read at all
        memoryview(b"\0" * 16 * N).cast("B", (2, 8 * N)),  # two dimensions
        memoryview(bytes(b)).cast("d"),
    ]
    refs = [sys.getrefcount(x) for x in broken]
    for _ in range(50):
        for x in broken:
            assert helper.deltas(x, a, pick.positions, pick.often) in (None, want)
            assert helper.deltas(b, a, x, pick.often) is None or x is broken[-3]
            limits = helper.deltas(b, a, pick.positions, pick.often, x, 0.1, pick.tops)
            assert limits is None or isinstance(limits, list | int)
    del x  # the loop's last object
    assert [sys.getrefcount(x) for x in broken] == refs


@st.composite
def memory_pairs(draw: st.DrawFn) -> tuple[Any, Any]:
    """Two readings' flat counters: mostly the same cores with some counters changed (memory ones or not), now
    and then other lengths or a tuple for an array."""
    cores = draw(st.integers(1, 8))
    prev = array("Q", draw(st.lists(st.integers(0, 2**64 - 1), min_size=cores * N, max_size=cores * N)))
    cur = array("Q", prev)
    for _ in range(draw(st.integers(0, 3))):
        where = draw(st.sampled_from([*MEMORY_POSITIONS[: cores * len(_MEM)], draw(st.integers(0, cores * N - 1))]))
        cur[where] = draw(st.integers(0, 2**64 - 1))
    shape = draw(st.sampled_from(["same", "same", "same", "shorter", "tuple"]))
    if shape == "shorter":
        cur = cur[: draw(st.integers(0, len(cur) - 1))]
    elif shape == "tuple":
        cur = tuple(cur)  # type: ignore[assignment]
    return (cur, prev) if draw(st.booleans()) else (prev, cur)


MEMORY_POSITIONS = [core * N + c for core in range(8) for c in _MEM]


@settings(max_examples=300, deadline=None)
@given(memory_pairs())
def test_memory_same_equals_the_careful_twin(pair: tuple[Any, Any]) -> None:
    _helper()
    cur, prev = pair
    native = memory_same_native(cur, prev)
    assert native is None or native == memory_same_careful(cur, prev)
    if isinstance(cur, array) and isinstance(prev, array) and len(cur) == len(prev):
        assert native is not None  # two arrays of one reading's shape: the helper decides
    assert memory_same(cur, prev) == memory_same_careful(cur, prev)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.binary(max_size=64), st.binary(max_size=16), st.integers(-3, 20))
def test_deltas_on_any_bytes_never_crash(a: bytes, b: bytes, pos: bytes, often: int) -> None:
    helper = _helper()
    assert helper.deltas(a, b, pos, often) is None
    qa, qb = array("Q", a[: len(a) // 8 * 8]), array("Q", b[: len(b) // 8 * 8])
    positions = array("I", pos[: len(pos) // 4 * 4])
    got = helper.deltas(qa, qb, positions, often)
    if got is not None:
        assert len(qa) == len(qb) and 0 <= often <= len(positions)
        assert all(p < len(qa) for p in positions)


# -- /proc/PID/stat ------------------------------------------------------------------------------------------


def pid_stat_line(comm: str, fields: list[str]) -> bytes:
    return f"4242 ({comm}) ".encode() + " ".join(fields).encode() + b"\n"


def check_pid_usage(data: bytes, utime: int, stime: int, dt: float) -> object:
    from neuron_monitor.groups.neuron_runtime_vcpu_usage.collector import CLOCK_TICKS, usage_careful

    got = _helper().pid_usage(data, utime, stime, dt, CLOCK_TICKS)
    if got is not None:
        want = usage_careful(data, utime, stime, dt)  # raises (failing the test) if the helper took a bad sample
        assert repr(got) == repr(want)
        assert orjson.dumps(got[0]) == orjson.dumps(want[0])
    return got


_time = st.one_of(
    st.integers(0, 10**6), st.integers(0, 2**53), st.integers(2**53 - 2, 2**53 + 2), st.integers(0, 2**70)
)
_dt = st.one_of(
    st.sampled_from([0.1, 0.100289447, 1e-300, 5e-324, 1.0, 0.3333333333333333, 1e300]),
    st.floats(min_value=1e-9, max_value=1e6, allow_nan=False),
)


@settings(max_examples=500, deadline=None)
@given(
    st.text(alphabet="ab() x-", max_size=8),
    st.lists(st.integers(-5, 10**9).map(str), min_size=20, max_size=40),
    _time,
    _time,
    _time,
    _time,
    _dt,
)
def test_pid_usage_equals_the_careful_twin(
    comm: str, fields: list[str], utime: int, stime: int, base_u: int, base_s: int, dt: float
) -> None:
    fields[0] = "S"
    fields[11], fields[12] = str(utime), str(stime)
    got = check_pid_usage(pid_stat_line(comm, fields), base_u, base_s, dt)
    in_range = max(utime, stime, base_u, base_s) <= 2**53 and 1e-9 <= dt <= 1e6
    if in_range and fields[19].isdigit() and int(fields[19]) <= 2**53:
        assert got is not None, "the helper declined a well-formed sample"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged(pid_stat_line("py thon (x)", ["S", *map(str, range(1, 45))])), _time, _time, _dt)
def test_pid_usage_on_damaged_samples_is_none_or_the_careful_result(
    data: bytes, base_u: int, base_s: int, dt: float
) -> None:
    try:
        check_pid_usage(data, base_u, base_s, dt)
    except ValueError:
        pytest.fail("the helper answered for a sample the careful parse refuses")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), _dt)
def test_pid_usage_on_any_bytes_never_crashes(data: bytes, dt: float) -> None:
    try:
        check_pid_usage(data, 0, 0, dt)
    except ValueError:
        pytest.fail("the helper answered for a sample the careful parse refuses")


def test_pid_usage_declines_what_it_cannot_match() -> None:
    helper = _helper()
    good = pid_stat_line("python", ["S", *map(str, range(1, 45))])
    assert helper.pid_usage(good, 0, 0, 0.1, 100) is not None
    assert helper.pid_usage(good, 0, 0, 0.0, 100) is None  # no period: the caller handles it
    assert helper.pid_usage(good, 0, 0, float("nan"), 100) is None
    assert helper.pid_usage(good, -1, 0, 0.1, 100) is None
    assert helper.pid_usage(good, 2**64, 0, 0.1, 100) is None
    assert helper.pid_usage(good, 0, 0, 0.1, 0) is None
    assert helper.pid_usage(good.replace(b" 12 ", b" 12\t"), 0, 0, 0.1, 100) is None
    assert helper.pid_usage(good[:40], 0, 0, 0.1, 100) is None
    with pytest.raises(TypeError):
        helper.pid_usage("text", 0, 0, 0.1, 100)


def test_pure_mode_leaves_no_helper_in_use(native_mode: str) -> None:
    """The suite's ``[pure]`` mode really runs without the helper: no module holds it, subprocesses are told."""
    from tests.conftest import native_users

    users = native_users()
    assert {m.__name__.rsplit(".", 1)[-1] for m in users} >= {"deltas", "collector"}
    if native_mode == "pure":
        assert os.environ.get("NEURON_MONITOR_NO_NATIVE") == "1"
        assert all(m.NATIVE is None for m in users)
    else:
        assert all(m.NATIVE is users[0].NATIVE for m in users)


def test_the_fast_path_tests_are_found_by_their_imports() -> None:
    """The tests of each fast path run in both modes because their imports reach it, none by a list."""
    from tests.conftest import REPO, reaches_fast_path

    found = ("test_native.py", "groups/test_host_groups.py", "groups/test_neuroncore_counters.py",
             "neuron/test_equivalence.py", "e2e/test_daemon.py", "groups/test_memory_used.py",
             "exporters/prometheus/test_prom_e2e.py", "groups/test_application.py")  # fmt: skip
    for rel in found:
        assert reaches_fast_path(REPO / "tests" / rel), rel
    for rel in ("sim/test_layouts.py", "exporters/cloudwatch/test_e2e.py", "schema/test_read.py"):
        assert not reaches_fast_path(REPO / "tests" / rel), rel
