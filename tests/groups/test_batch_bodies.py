"""The batch path of the data-block groups (`_bodies_batch`: many steady applications in one call of the compiled
helper) against the per-application path (`_body`), over whole sequences of readings.

Two instances of a group see the same applications collection after collection, one through `collect` as the
daemon runs it, the other with its batch path switched off. Every collection must give the same bodies (keys,
order, types, digits: compared by repr and by their JSON bytes) and leave the same tracker state, whatever the
counters do: run, stand still, go back, jump past 2^53, change their core count, or move an application to two
devices. Readings are ``array("Q")``s as the data-block parser makes them (tuples, which the helper declines, are
covered by the groups' own tests).
"""

from __future__ import annotations

from array import array
from typing import Any

import orjson
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from neuron_monitor.app import App
from neuron_monitor.groups.data_block_group import DataBlockGroup
from neuron_monitor.groups.execution_stats import ExecutionStats
from neuron_monitor.groups.neuroncore_counters import NeuroncoreCounters
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.native import NATIVE
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.apps import AppData, DeviceData
from neuron_monitor.neuron.appsinfo import AppInfo
from neuron_monitor.neuron.datablock import ND_KEPT, BlockReading, N
from neuron_monitor.neuron.hardware import CHIPS, Topology

TRN1 = Topology((0, 1), 2, 1, CHIPS["Trainium1"], "Trainium1")
TRN2 = Topology(tuple(range(16)), 8, 2, CHIPS["Trainium2"], "Trainium2")
GROUPS = (NeuroncoreCounters, ExecutionStats)
_BUSY = (L.NC_TIME_IN_USE, L.NC_MAC_COUNT, *(c for _, c in L.EXECUTION_SUMMARY), *(c for _, c in L.ERROR_SUMMARY))

pytestmark = pytest.mark.skipif(NATIVE is None, reason="the batch path needs the compiled helper")


class _PerApp:
    """Switches a group's batch path off: every application goes through `_body`."""

    @staticmethod
    def bodies(apps: Any) -> dict[int, dict[str, Any]]:
        return {}


def _reading(t: float, flat: list[int]) -> BlockReading:
    return BlockReading(t, True, tuple(0 for _ in ND_KEPT), array("Q", flat), "tag", ())


@st.composite
def _runs(draw: st.DrawFn) -> tuple[Topology, list[list[tuple[int, int, float, list[int]]]]]:
    """Collections of 1-4 applications: per collection, (pid, device, time, flat counters) of each reading. Half
    the runs are the usual case under load (every counter moves a little, one device each, a period that has a
    length), where the batch path builds bodies; the others are anything."""
    usual = draw(st.booleans())
    topology = TRN2 if usual else draw(st.sampled_from([TRN2, TRN1]))
    pids = draw(st.lists(st.integers(1, 99), min_size=1, max_size=4, unique=True))
    cores = {pid: 8 if usual else draw(st.sampled_from([8, 2, 3])) for pid in pids}
    flats = {pid: [draw(st.integers(0, 10**6)) for _ in range(cores[pid] * N)] for pid in pids}
    step = st.integers(1, 10**6) if usual else st.one_of(
        st.integers(1, 10**6), st.just(0), st.integers(-50, -1), st.integers(2**53 - 10, 2**53 + 10),
        st.integers(10**15, 10**17),
    )  # fmt: skip
    collections = []
    t = 1.0
    for _ in range(draw(st.integers(2, 5))):
        t += draw(st.sampled_from([0.1, 0.100289447, 5.0] if usual else [0.0, 1e-9, 0.1, 5.0]))
        now = []
        for pid in pids:
            if not usual and draw(st.integers(0, 4)) == 0:  # the app's core count changes (another block size)
                cores[pid] = draw(st.sampled_from([2, 8]))
                flats[pid] = (flats[pid] + [0] * 8 * N)[: cores[pid] * N]
            flat = flats[pid]
            for c in _BUSY[:3] if usual else _BUSY:  # usually: time in use, MACs, completed executions
                for core in range(cores[pid]):
                    at = core * N + c
                    flat[at] = max(0, min(2**64 - 1, flat[at] + draw(step)))
            for c in (L.NC_LATENCY_DEVICE, L.NC_LATENCY_TOTAL):
                for core in range(cores[pid]):
                    flat[core * N + c] = draw(st.integers(0, 10**7))
            device = pid % 16 if usual else draw(st.sampled_from([pid % 16, (pid + 1) % 16]))
            now.append((pid, device, t, list(flat)))
        collections.append(now)
    return topology, collections


def _apply(apps: dict[int, App], topology: Topology, now: list[tuple[int, int, float, list[int]]]) -> list[App]:
    """The applications after one snapshot: each reading on its device (a new device next to the old one: an
    application on two devices, which the batch path leaves to `_body`)."""
    out = []
    for pid, device, t, flat in now:
        app = apps.get(pid)
        if app is None:
            app = apps[pid] = App(pid, "tag", "", AppData(pid, topology), (device,))
        data = app.data
        dd = data.devices.get(device)
        if dd is None:
            data.devices[device] = DeviceData(device, _reading(t, flat), array("Q", flat), t, AppInfo(pid, 0, (), 0, 0))
        else:
            dd.reading = _reading(t, flat)
        out.append(app)
    return out


def _state(group: DataBlockGroup) -> Any:
    return {pid: {d: (tuple(p[0]), p[1]) for d, p in seen.items()} for pid, seen in group._tracker._prev.items()}


@pytest.mark.parametrize("group_type", GROUPS, ids=lambda g: g.type_name)
@settings(max_examples=150, deadline=None)
@given(run=_runs())
def test_the_batch_path_gives_what_the_per_application_path_does(
    group_type: type[DataBlockGroup], run: tuple[Topology, list[list[tuple[int, int, float, list[int]]]]]
) -> None:
    topology, collections = run
    batch, per_app = group_type(RootFS("/")), group_type(RootFS("/"))
    per_app._bodies_batch = _PerApp.bodies  # type: ignore[method-assign]
    taken: list[int] = []
    batch_bodies = batch._bodies_batch

    def counting(apps: Any) -> dict[int, dict[str, Any]]:
        out = batch_bodies(apps)
        taken.append(len(out))
        return out

    batch._bodies_batch = counting  # type: ignore[method-assign]
    apps_a: dict[int, App] = {}
    apps_b: dict[int, App] = {}
    for now in collections:
        got = batch.collect(_apply(apps_a, topology, now), [])
        want = per_app.collect(_apply(apps_b, topology, now), [])
        assert repr(got) == repr(want)
        assert orjson.dumps(got, option=orjson.OPT_NON_STR_KEYS) == orjson.dumps(want, option=orjson.OPT_NON_STR_KEYS)
        assert _state(batch) == _state(per_app)
    event("the batch path built bodies" if any(taken) else "every body per application")


@pytest.mark.parametrize("group_type", GROUPS, ids=lambda g: g.type_name)
def test_the_batch_path_takes_the_steady_trn2_case(group_type: type[DataBlockGroup]) -> None:
    """16 applications on their own devices, every core busy and executing: after the first collection (the
    baselines) the batch path builds every body, so `_body` is not called."""
    group = group_type(RootFS("/"))
    apps: dict[int, App] = {}
    calls: list[int] = []
    per_app_body = group._body

    def counting_body(app: App) -> dict[str, Any] | None:
        calls.append(app.pid)
        return per_app_body(app)

    group._body = counting_body  # type: ignore[method-assign]

    def flat(k: int) -> list[int]:
        out = [0] * (8 * N)
        for core in range(8):
            for c in _BUSY[:3]:  # time in use, MACs, completed executions
                out[core * N + c] = k * 1000 + core
            out[core * N + L.NC_LATENCY_TOTAL] = 5000
        return out

    group.collect(_apply(apps, TRN2, [(pid, pid - 1, 1.0, flat(1)) for pid in range(1, 17)]), [])
    assert len(calls) == 16  # the first sighting: baselines, through _body
    bodies = group.collect(_apply(apps, TRN2, [(pid, pid - 1, 1.1, flat(2)) for pid in range(1, 17)]), [])
    assert len(calls) == 16 and len(bodies) == 16
    assert all(body["period"] == pytest.approx(0.1) for body in bodies.values())
