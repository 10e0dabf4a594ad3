"""Hand-built AppData for group unit tests."""

from __future__ import annotations

from neuron_monitor.neuron.app import App
from neuron_monitor.neuron.apps import AppData, DeviceData
from neuron_monitor.neuron.appsinfo import AppInfo
from neuron_monitor.neuron.datablock import ND_KEPT, BlockReading, ModelNode
from neuron_monitor.neuron.hardware import CHIPS, Topology

TRN1 = Topology((0, 1), 2, 1, CHIPS["Trainium1"], "Trainium1")
TRN2 = Topology((0, 1), 8, 2, CHIPS["Trainium2"], "Trainium2")


def counters(values: dict[int, int]) -> tuple[int, ...]:
    out = [0] * 31
    for k, v in values.items():
        out[k] = v
    return tuple(out)


def app_with(nc: dict[int, tuple[int, ...]], t: float, like: App | None = None, device: int = 0,
             topology: Topology = TRN1, nd: tuple[int, ...] = (0,) * 31, models: tuple[ModelNode, ...] = (),
             locked: tuple[str, ...] = ()) -> App:  # fmt: skip
    assert sorted(nc) == list(range(len(nc))), "cores 0..n-1"
    flat = tuple(v for core in sorted(nc) for v in nc[core])
    reading = BlockReading(t, True, tuple(nd[c] for c in ND_KEPT), flat, "tag", models)
    info = AppInfo(1234, 0, locked, 0, 0)
    if like is None:
        data = AppData(1234, topology)
        data.devices[device] = DeviceData(device, reading, flat, t, info)
    else:
        data = like.data
        data.devices[device].reading = reading
        data.devices[device].info = info
    return App(pid=1234, tag="tag", data=data, devices=(device,))
