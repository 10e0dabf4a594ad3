"""Per-group bookkeeping of counter deltas for runtime groups: each count reported once, per (pid, device, core).

A `DeltaTracker(indices)` belongs to one group instance. `step(app)` returns, for each device of the app, the
change of those NC counters on every physical core since this group last looked (or since the pid's birth
baseline the first time) and the wall time between the two readings; `forget(pid)` drops a gone pid's state.
Deltas are computed for a whole block at once from the flat counters of the reading and of the previous look (kept
as they were read): by `device_deltas_native` (the compiled helper: no int object per counter picked) when the
helper is built and both are ``array("Q")``s, else by its careful twin `device_deltas_careful` (one ``itemgetter``
picks the counters of every core from each, one ``map(sub, ...)`` subtracts).

Both follow the project's counter rule (util/counters.py; each NC counter's source in neuron/plausible.py): a
counter that went back was reset and counts its new value (the MAC count may also wrap at 2^64, when proven), and
a reading the rule refuses (a step past what the hardware can count over the interval, a value in the top half of
64 bits) makes `step` raise `ImplausibleDelta` naming it; that device's next reading is then a new baseline (its
deltas are not returned that period), so a damaged value is never counted and never counted from.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Sequence
from functools import lru_cache
from operator import itemgetter, sub

from neuron_monitor.native import NATIVE
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.app import App
from neuron_monitor.neuron.apps import AppData, DeviceData
from neuron_monitor.neuron.datablock import N
from neuron_monitor.neuron.plausible import NAMES, implausible_delta, nc_source
from neuron_monitor.util.counters import step as counter_step
from neuron_monitor.util.errors import GroupError

_MEM = tuple(sorted(c for _, c in L.DEVICE_MEM_COUNTERS))
MEM_COUNTERS = _MEM  # the device memory counters of a core (NC counter indices), in order
_MEM_LO, _MEM_HI = _MEM[0], _MEM[-1] + 1
assert tuple(range(_MEM_LO, _MEM_HI)) == _MEM, "device memory counters are expected to be contiguous"

Picker = Callable[[Sequence[int]], tuple[int, ...]]
# One device of an app: (device index, its DeviceData, seconds between the two readings, physical cores in the
# reading, deltas). The deltas are counter-major: deltas[k * cores + core] is the change of indices[k] on that core
# (possibly ending early: see DeltaTracker's ``often``).
DeviceDelta = tuple[int, DeviceData, float, int, list[int]]


@lru_cache(maxsize=64)
def picker(indices: tuple[int, ...], cores: int) -> Picker:
    """Picks NC counters ``indices`` of cores 0..cores-1 from flat counters, counter-major:
    ``picked[k * cores + core]`` is counter ``indices[k]`` of ``core``."""
    positions = [core * N + i for i in indices for core in range(cores)]
    if len(positions) == 1:
        only = positions[0]
        return lambda t: (t[only],)
    return itemgetter(*positions)


def memory_counters(counters: Sequence[int]) -> tuple[Sequence[int], ...]:
    """The device memory counters of every core in a reading's flat counters (what memory_used's output depends
    on): one strided slice per counter, arrays compared in C without an int object per value."""
    return tuple(counters[c::N] for c in _MEM)


def memory_same_careful(cur: Sequence[int], prev: Sequence[int]) -> bool:
    """True when two readings' flat counters hold the same device memory counters on every core (the same cores,
    the same sequence type)."""
    return memory_counters(cur) == memory_counters(prev)


_MEM_POSITIONS: dict[int, array[int]] = {}  # cores -> the positions of every core's device memory counters


def memory_same_native(cur: Sequence[int], prev: Sequence[int]) -> bool | None:
    """`memory_same_careful` by the compiled helper's delta step over the memory counters' positions (with no
    frequent counter, it returns no delta at all exactly when none of them changed). None when the helper is not
    built or declines (not two ``array("Q")``s of one length): the careful twin then decides."""
    if NATIVE is None or len(cur) != len(prev) or len(cur) % N:
        return None
    cores = len(cur) // N
    positions = _MEM_POSITIONS.get(cores)
    if positions is None:
        positions = _MEM_POSITIONS[cores] = array("I", _positions(_MEM, cores))
    d: list[int] | None = NATIVE.deltas(cur, prev, positions, 0)
    return None if d is None else not d


def memory_same(cur: Sequence[int], prev: Sequence[int]) -> bool:
    """True when two readings' flat counters hold the same device memory counters (see `memory_same_careful`)."""
    same = memory_same_native(cur, prev)
    return memory_same_careful(cur, prev) if same is None else same


def _nothing(counters: Sequence[int]) -> tuple[int, ...]:
    return ()


def positions_of(indices: tuple[int, ...], cores: int) -> list[int]:
    """Where `picker` picks: ``positions[k * cores + core]`` is counter ``indices[k]`` of ``core``."""
    return [core * N + i for i in indices for core in range(cores)]


_positions = positions_of


class Pick:
    """How one tracker picks from the flat counters of a device with ``cores`` cores: the frequent and the rare
    counters' pickers, and the positions of both (frequent first, as array("I")) for the compiled helper."""

    __slots__ = (
        "_bounds", "cores", "frequent", "indices", "limits", "often", "positions", "rare", "sources", "tops"
    )  # fmt: skip

    def __init__(self, indices: tuple[int, ...], often: int, cores: int) -> None:
        rare = indices[often:]
        self.indices = indices
        self.cores = cores
        self.frequent = picker(indices[:often], cores)
        self.rare = picker(rare, cores) if rare else _nothing
        self.often = often * cores
        self.positions = array("I", _positions(indices, cores))
        # each picked counter's source (plausible.nc_source), and its rate, burst and top per position for the helper
        self.sources = tuple(nc_source(i) for i in indices)
        self.limits = array("d", [x for src in self.sources for _ in range(cores) for x in (src.rate, src.burst)])
        self.tops = array("Q", [src.top for src in self.sources for _ in range(cores)])
        self._bounds: tuple[float, tuple[float, ...]] = (math.nan, ())  # the last interval and `bounds` over it

    def bounds(self, dt: float) -> tuple[float, ...]:
        """Each picked counter's largest step over ``dt`` seconds (its source's ``bound``). The applications of one
        collection are read at one time, so their intervals are equal: the last interval's bounds are kept."""
        last, bounds = self._bounds
        if dt != last:
            bounds = tuple(src.bound(dt) for src in self.sources)
            self._bounds = (dt, bounds)
        return bounds

    def where(self, k: int) -> tuple[int, int]:
        """(NC counter, physical core) of position ``k`` of the deltas."""
        return self.indices[k // self.cores], k % self.cores


Picks = tuple[tuple[int, ...], tuple[int, ...]]  # the frequent and the rare counters picked from one reading


def device_deltas_careful(
    cur: Sequence[int], prev: Sequence[int], pick: Pick, prev_picks: Picks | None = None, dt: float | None = None
) -> tuple[list[int] | int, Picks]:
    """The changes of the picked counters from ``prev`` to ``cur`` (flat counters of one device, the same length),
    counter-major: the frequent counters', then the rare ones' only when one of them changed; a counter that went
    back was reset and counts its new value. With ``dt`` (seconds between the readings), by the whole counter rule
    (util/counters.py): the index of the first reading it refuses instead of the deltas. Also what was picked from
    ``cur``, to be passed as ``prev_picks`` next time (then ``prev`` is not picked again)."""
    picked, rare = pick.frequent(cur), pick.rare(cur)
    prev_picked, prev_rare = prev_picks if prev_picks is not None else (pick.frequent(prev), pick.rare(prev))
    d = list(map(sub, picked, prev_picked))
    if rare != prev_rare:
        d += map(sub, rare, prev_rare)
        now, before = picked + rare, prev_picked + prev_rare
    else:
        now, before = picked, prev_picked
    if dt is None:
        if min(d) < 0:
            d = [v if v >= 0 else c for v, c in zip(d, now, strict=True)]
        return d, (picked, rare)
    bad = _refused(d, now, before, pick, dt)
    return (bad if bad is not None else d), (picked, rare)


def _refused(d: list[int], now: tuple[int, ...], before: tuple[int, ...], pick: Pick, dt: float) -> int | None:
    """Apply the counter rule to ``d`` in place (a reset counts the new value, a proven wrap its step across the
    top); the index of the first reading the rule refuses, or None. One counter's cores at a time: a row whose
    deltas are all within bounds (the usual case) is checked with one ``min`` and two ``max``."""
    cores = pick.cores
    bounds = pick.bounds(dt)
    for k, src in enumerate(pick.sources[: len(d) // cores]):
        lo, hi = k * cores, (k + 1) * cores
        row = d[lo:hi]
        if min(row) >= 0 and max(row) <= bounds[k] and max(now[lo:hi]) <= src.top:
            continue
        for j in range(lo, hi):
            count, _, problem = counter_step(before[j], now[j], dt, src)
            if problem is not None or count is None:
                return j
            d[j] = count
    return None


def device_deltas_native(cur: Sequence[int], prev: Sequence[int], pick: Pick, dt: float) -> list[int] | int | None:
    """`device_deltas_careful` (with ``dt``) by the compiled helper: every position read once from each array, no
    int object but the deltas. None when the helper is not built or ``cur`` and ``prev`` are not ``array("Q")``s
    of one length (a departed app's merged reading, a birth baseline of zeros): the careful twin then computes."""
    if NATIVE is None:
        return None
    d: list[int] | int | None = NATIVE.deltas(cur, prev, pick.positions, pick.often, pick.limits, dt, pick.tops)
    return d


class ImplausibleDelta(GroupError):
    """A counter of an application's data block grew past what the hardware can count (neuron/plausible.py)."""


class DeltaTracker:
    """Follows NC counters ``indices`` (a tuple) for one group instance.

    ``often``: how many of the first ``indices`` change at most collections (default: all). The others rarely
    change (error counts): while all of them equal their previous values, their deltas are not computed and the
    deltas returned stop after the frequent ones (the missing ones are 0).
    """

    def __init__(self, indices: tuple[int, ...], often: int | None = None) -> None:
        self.indices = indices
        self.often = len(indices) if often is None else often
        self._picks: dict[int, Pick] = {}  # cores -> how to pick
        self._rebase: set[tuple[int, int]] = set()  # (pid, device) whose next reading is a new baseline
        # pid -> device -> (the flat counters of the previous look as read, the reading's time, and what the careful
        # twin picked from them if it ran)
        self._prev: dict[int, dict[int, tuple[Sequence[int], float, Picks | None]]] = {}

    def pick_for(self, cores: int) -> Pick:
        """How this tracker picks from a device with ``cores`` physical cores (made once per core count)."""
        pick = self._picks.get(cores)
        if pick is None:
            pick = self._picks[cores] = Pick(self.indices, self.often, cores)
        return pick

    def step(self, app: App) -> list[DeviceDelta]:
        """The deltas of each device of ``app`` since the last look; `ImplausibleDelta` (after keeping the other
        devices' readings as their baselines) when the counter rule refuses a reading; that device's next reading
        is then a new baseline, and its deltas are not returned that time."""
        data = app.data
        if not isinstance(data, AppData):
            return []
        out = []
        bad: list[str] = []
        devices = data.devices
        seen = self._prev.get(app.pid)
        if seen is None:
            seen = self._prev[app.pid] = {}
        for index in sorted(devices) if len(devices) > 1 else devices:
            dd = devices[index]
            reading = dd.reading
            cur = reading.counters
            n = len(cur)
            cores = n // N
            pick = self.pick_for(cores)
            prev = seen.get(index)
            if self._rebase and (app.pid, index) in self._rebase:  # its last reading was refused: a new baseline
                seen[index] = (cur, reading.time, None)
                problem = _past_top(cur, pick)
                if problem is None:
                    self._rebase.discard((app.pid, index))
                else:
                    bad.append(f"neuron{index} {problem}: the data block is damaged or forged")
                continue
            if prev is not None and len(prev[0]) // N == cores:
                base, prev_t, prev_picks = prev
            else:  # first look: count from the birth baseline
                base = dd.birth
                if len(base) != n:  # never within one slot; kept safe: missing cores count from 0
                    base = (tuple(base) + (0,) * n)[:n]
                prev_t, prev_picks = dd.birth_time, None
            picks = None
            dt = max(0.0, reading.time - prev_t)
            d = device_deltas_native(cur, base, pick, dt)
            if d is None:
                d, picks = device_deltas_careful(cur, base, pick, prev_picks, dt)
            seen[index] = (cur, reading.time, picks)
            if type(d) is int:
                counter, core = pick.where(d)
                bad.append(implausible_delta(index, core, counter, picked_delta(cur, base, counter, core), dt))
                self._rebase.add((app.pid, index))
                continue
            assert not isinstance(d, int)
            out.append((index, dd, dt, cores, d))
        if bad:
            raise ImplausibleDelta("; ".join(bad))
        return out

    def looks(self, pid: int) -> dict[int, tuple[Sequence[int], float, Picks | None]] | None:
        """The previous look at each device of ``pid`` (the flat counters as read, the reading's time, what the
        careful twin picked from them), as `step` keeps it and replaces it: for groups/application.py, which steps
        the same way in one compiled call."""
        return self._prev.get(pid)

    def forget(self, pid: int) -> None:
        self._prev.pop(pid, None)
        if self._rebase:
            self._rebase = {k for k in self._rebase if k[0] != pid}


def _past_top(cur: Sequence[int], pick: Pick) -> str | None:
    """Why a reading cannot be a baseline (a picked counter past its source's top), or None."""
    for k, (at, top) in enumerate(zip(pick.positions, pick.tops, strict=True)):
        if cur[at] > top:
            counter, core = pick.where(k)
            return f"core {core}: {NAMES.get(counter, f'NC counter {counter}')} holds {cur[at]}, past what it can"
    return None


def picked_delta(cur: Sequence[int], prev: Sequence[int], counter: int, core: int) -> int:
    """The change of NC counter ``counter`` of ``core`` from ``prev`` to ``cur`` (its new value if it went back)."""
    at = core * N + counter
    return cur[at] - prev[at] if cur[at] >= prev[at] else cur[at]


def cores_in_use(dd: DeviceData, busy: Sequence[int] | None = None) -> list[int]:
    """Physical cores this app uses on the device: device memory allocated, a model loaded, or time in use
    (``busy[core]``, a delta of TIME_IN_USE, nonzero)."""
    reading = dd.reading
    counters = reading.counters
    cores = len(counters) // N
    if busy and len(busy) == cores and all(busy):
        return list(range(cores))
    models = {m.nc_index for m in reading.models} if reading.models else ()
    used = []
    for core in range(cores):
        base = core * N
        if any(counters[base + _MEM_LO : base + _MEM_HI]) or core in models or (busy and busy[core]):
            used.append(core)
    return used
