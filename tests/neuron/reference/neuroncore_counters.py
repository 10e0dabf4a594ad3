"""Runtime group ``neuroncore_counters``: per NeuronCore utilization and FLOPS of each application.

Reads the per-core TIME_IN_USE (µs) and MAC_COUNT counters of the app's data blocks (neuron/apps.py) and returns
``neuroncores_in_use`` keyed by the flat logical core index (device x cores per device + core):
``neuroncore_utilization`` = Δ time in use / Δ wall time x 100 (for a logical core: the mean of its physical
cores), ``flops`` = 2 x Δ MACs / Δ wall time (summed over its physical cores). With logical cores (LNC=2, e.g.
trn2 "v3d") each entry also carries the physical breakdown as AWS prints it: ``"v3d": {"nc_v3.0":
{"neuroncore_utilization": ..}, "nc_v3.1": {..}}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from neuron_monitor.groups.base import RuntimeGroup
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.app import App
from tests.neuron.reference.apps import AppData
from tests.neuron.reference.deltas import DeltaTracker, cores_in_use

_INDICES = (L.NC_TIME_IN_USE, L.NC_MAC_COUNT)


class NeuroncoreCounters(RuntimeGroup):
    type_name = "neuroncore_counters"

    def __init__(self, root: RootFS) -> None:
        super().__init__(root)
        self._tracker = DeltaTracker()

    def _body(self, app: App) -> dict[str, Any]:
        data = app.data
        if not isinstance(data, AppData):
            return {"neuroncores_in_use": {}}
        topo = data.topology
        lnc = max(1, topo.lnc)
        version = topo.chip.core_version if topo.chip else ""
        cores: dict[int, dict[str, Any]] = {}
        period = 0.0
        for dd in self._tracker.step(app, _INDICES):
            dt = dd.dt
            period = max(period, dt)
            busy = {core: d[0] for core, d in dd.deltas.items()}
            per_logical: dict[int, list[tuple[int, float, int]]] = {}
            for phys in cores_in_use(dd.data, busy):
                d_busy, d_macs = dd.deltas.get(phys, (0, 0))
                util = min(100.0, d_busy / (dt * 1e4)) if dt > 0 else 0.0
                flops = int(2 * d_macs / dt) if dt > 0 else 0
                per_logical.setdefault(phys // lnc, []).append((phys % lnc, util, flops))
            for local, parts in per_logical.items():
                entry: dict[str, Any] = {
                    "neuroncore_utilization": sum(u for _, u, _ in parts) / len(parts),
                    "flops": sum(f for _, _, f in parts),
                }
                if lnc > 1 and version:
                    entry[f"{version}d"] = {
                        f"nc_{version}.{i}": {"neuroncore_utilization": u} for i, u, _ in sorted(parts)
                    }
                cores[dd.device * topo.logical_cores + local] = entry
        body: dict[str, Any] = {"neuroncores_in_use": {str(k): cores[k] for k in sorted(cores)}}
        if period > 0:
            body["period"] = round(period, 9)
        return body

    def collect(self, apps: Sequence[App], gone: Sequence[App]) -> dict[int, dict[str, Any]]:
        out = {app.pid: self._body(app) for app in apps}
        for app in gone:
            out[app.pid] = self._body(app)
            self._tracker.forget(app.pid)
        return out


GROUP = NeuroncoreCounters
