"""Per-group bookkeeping of counter deltas for runtime groups: each count reported once, per (pid, device, core).

A `DeltaTracker` belongs to one group instance. `step(app, indices)` returns, for each device of the app, the
change of the chosen NC counters on each physical core since this group last looked (or since the pid's birth
baseline the first time) and the wall time between the two readings; `forget(pid)` drops a gone pid's state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from operator import itemgetter, sub

from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.app import App
from tests.neuron.reference.apps import AppData, DeviceData
from tests.neuron.reference.datablock import ZERO_COUNTERS

MEM_PICK = itemgetter(*(c for _, c in L.DEVICE_MEM_COUNTERS))


@lru_cache(maxsize=32)
def _picker(indices: tuple[int, ...]) -> Callable[[tuple[int, ...]], tuple[int, ...]]:
    if len(indices) == 1:
        i = indices[0]
        return lambda t: (t[i],)
    return itemgetter(*indices)  # type: ignore[return-value]


@dataclass(slots=True)
class DeviceDelta:
    device: int
    data: DeviceData
    dt: float  # seconds between the two readings
    deltas: dict[int, tuple[int, ...]]  # physical core -> deltas of the requested counters, in request order


class DeltaTracker:
    def __init__(self) -> None:
        self._prev: dict[tuple[int, int], tuple[dict[int, tuple[int, ...]], float]] = {}

    def step(self, app: App, indices: Sequence[int]) -> list[DeviceDelta]:
        data = app.data
        if not isinstance(data, AppData):
            return []
        out = []
        pick = _picker(tuple(indices))
        for index, dd in sorted(data.devices.items()):
            key = (app.pid, index)
            prev = self._prev.get(key)
            if prev is None:
                prev_nc, prev_t = dd.birth, dd.birth_time
            else:
                prev_nc, prev_t = prev
            cur = dd.reading.nc
            deltas = {}
            for core, counters in cur.items():
                d = tuple(map(sub, pick(counters), pick(prev_nc.get(core, ZERO_COUNTERS))))
                deltas[core] = d if min(d) >= 0 else tuple(max(0, v) for v in d)
            self._prev[key] = (cur, dd.reading.time)
            out.append(DeviceDelta(index, dd, max(0.0, dd.reading.time - prev_t), deltas))
        return out

    def forget(self, pid: int) -> None:
        for key in [k for k in self._prev if k[0] == pid]:
            del self._prev[key]


def cores_in_use(dd: DeviceData, busy_deltas: dict[int, int] | None = None) -> list[int]:
    """Physical cores this app uses on the device: device memory allocated, a model loaded, or time in use."""
    models = {m.nc_index for m in dd.reading.models}
    used = []
    for core, counters in dd.reading.nc.items():
        if any(MEM_PICK(counters)) or core in models or (busy_deltas and busy_deltas.get(core)):
            used.append(core)
    return used
