"""neuroncore_counters: utilization and FLOPS from time-in-use and MAC deltas, flat core keys, the v3d breakdown."""

from __future__ import annotations

from neuron_monitor.groups.neuroncore_counters import NeuroncoreCounters
from neuron_monitor.host.rootfs import RootFS
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
