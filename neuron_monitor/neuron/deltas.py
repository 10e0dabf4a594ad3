"""Per-group bookkeeping of counter deltas for runtime groups: each count reported once, per (pid, device, core).

A `DeltaTracker(indices)` belongs to one group instance. `step(app)` returns, for each device of the app, the
change of those NC counters on every physical core since this group last looked (or since the pid's birth
baseline the first time) and the wall time between the two readings; `forget(pid)` drops a gone pid's state.
Deltas are computed for a whole block at once: one ``itemgetter`` picks the counters of every core from the
flat counters of a reading, one ``map(sub, ...)`` subtracts the picks kept from the previous look.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from operator import itemgetter, sub

from neuron_monitor.app import App
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.apps import AppData, DeviceData
from neuron_monitor.neuron.datablock import BlockReading, N

_MEM = tuple(sorted(c for _, c in L.DEVICE_MEM_COUNTERS))
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


def memory_counters(reading: BlockReading) -> tuple[Sequence[int], ...]:
    """The device memory counters of every core of a reading (what memory_used's output depends on): one strided
    slice per counter, arrays compared in C without an int object per value."""
    counters = reading.counters
    return tuple(counters[c::N] for c in _MEM)


def _nothing(counters: Sequence[int]) -> tuple[int, ...]:
    return ()


class DeltaTracker:
    """Follows NC counters ``indices`` (a tuple) for one group instance.

    ``often``: how many of the first ``indices`` change at most collections (default: all). The others rarely
    change (error counts): while all of them equal their previous values, their deltas are not computed and the
    deltas returned stop after the frequent ones (the missing ones are 0).
    """

    def __init__(self, indices: tuple[int, ...], often: int | None = None) -> None:
        self.indices = indices
        self.often = len(indices) if often is None else often
        self._pickers: dict[int, tuple[Picker, Picker]] = {}  # cores -> (frequent, rare) pickers
        # pid -> device -> (the frequent and the rare counters as last picked, the reading's time)
        self._prev: dict[int, dict[int, tuple[tuple[int, ...], tuple[int, ...], float]]] = {}

    def _pickers_for(self, cores: int) -> tuple[Picker, Picker]:
        pickers = self._pickers.get(cores)
        if pickers is None:
            rare = self.indices[self.often :]
            pickers = self._pickers[cores] = (
                picker(self.indices[: self.often], cores),
                picker(rare, cores) if rare else _nothing,
            )
        return pickers

    def step(self, app: App) -> list[DeviceDelta]:
        data = app.data
        if not isinstance(data, AppData):
            return []
        out = []
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
            pick, pick_rare = self._pickers_for(cores)
            picked, rare = pick(cur), pick_rare(cur)
            prev = seen.get(index)
            if prev is not None and len(prev[0]) == len(picked):
                prev_picked, prev_rare, prev_t = prev
            else:  # first look: count from the birth baseline
                birth = dd.birth
                if len(birth) != n:  # never within one slot; kept safe: missing cores count from 0
                    birth = (tuple(birth) + (0,) * n)[:n]
                prev_picked, prev_rare, prev_t = pick(birth), pick_rare(birth), dd.birth_time
            d = list(map(sub, picked, prev_picked))
            if rare != prev_rare:
                d += map(sub, rare, prev_rare)
            if min(d) < 0:
                d = [v if v > 0 else 0 for v in d]
            seen[index] = (picked, rare, reading.time)
            out.append((index, dd, max(0.0, reading.time - prev_t), cores, d))
        return out

    def forget(self, pid: int) -> None:
        self._prev.pop(pid, None)


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
