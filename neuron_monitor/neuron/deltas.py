"""Per-group bookkeeping of counter deltas for runtime groups: each count reported once, per (pid, device, core).

A `DeltaTracker` belongs to one group instance. `step(app, indices)` returns, for each device of the app, the
change of the chosen NC counters on each physical core since this group last looked (or since the pid's birth
baseline the first time) and the wall time between the two readings; `forget(pid)` drops a gone pid's state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from neuron_monitor.groups.base import App
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.apps import AppData, DeviceData
from neuron_monitor.neuron.datablock import ZERO_COUNTERS


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
                before = prev_nc.get(core, ZERO_COUNTERS)
                deltas[core] = tuple(max(0, counters[i] - before[i]) for i in indices)
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
        mem = sum(counters[c] for _, c in L.DEVICE_MEM_COUNTERS)
        if mem or core in models or (busy_deltas and busy_deltas.get(core)):
            used.append(core)
    return used
