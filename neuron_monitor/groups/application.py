"""One application's data-block groups in one compiled call: neuroncore_counters, execution_stats, memory_used.

Each of the three groups reads the same data block of an application, keeps its own delta tracker and state, and
is defined by its own folder (spec, body.py, collector); `DataBlockGroup.collect` runs them one group at a time,
each application in turn. When the three groups of a runtime scope are due together and, for an application, all
three trackers look back at the very same reading (the usual case: they were collected together last time), the
per-application part of all three is one call of the compiled helper: `collect_application_native`. It gives the
bodies each group's own path would give and leaves each group's state as that path would, or declines (None) and
changes nothing, so the groups' own paths run for that application (a departed application, more than one device,
a first look, a pending rebase, a reading the counter rule refuses, a core not busy, a period without a length,
a value past 2^53, a layout it does not know, no compiled helper).

Its plain twin, `collect_application_careful`, is the groups' own paths composed: each group's ``collect`` for the
one application. The scheduler hands every application the compiled call declined (and every departed one) to
the groups' ``collect`` as before (daemon/scheduler.py), so errors and absent values are worded there only.
tests/groups/test_application.py holds the two equal (bodies, key order, each group's state afterwards).
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Iterable, Mapping
from typing import Any

from neuron_monitor.groups.base import RuntimeGroup
from neuron_monitor.groups.data_block_group import ImplausibleValue
from neuron_monitor.groups.execution_stats import body as ES
from neuron_monitor.groups.execution_stats import collector as es_collector
from neuron_monitor.groups.execution_stats.collector import ExecutionStats
from neuron_monitor.groups.memory_used.collector import MemoryUsed
from neuron_monitor.groups.neuroncore_counters import body as NC
from neuron_monitor.groups.neuroncore_counters import collector as nc_collector
from neuron_monitor.groups.neuroncore_counters.collector import NeuroncoreCounters
from neuron_monitor.groups.registry import DATA_BLOCK_GROUPS
from neuron_monitor.native import NATIVE
from neuron_monitor.neuron.app import App
from neuron_monitor.neuron.apps import AppData
from neuron_monitor.neuron.datablock import N
from neuron_monitor.neuron.deltas import MEM_COUNTERS, Pick, positions_of
from neuron_monitor.neuron.hardware import Topology

log = logging.getLogger("neuron_monitor.groups.application")
NAMES = (NeuroncoreCounters.type_name, ExecutionStats.type_name, MemoryUsed.type_name)
assert NAMES == DATA_BLOCK_GROUPS
Bodies = tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]  # in NAMES' order; None: left out

# (id of a topology, physical cores, device) -> (that topology, the helper's kit for it, or None: not built)
_KITS: dict[tuple[int, int, int], tuple[Topology, tuple[Any, ...] | None]] = {}
_MAX_KITS = 256


def _pick_bytes(pick: Pick) -> tuple[bytes, bytes, bytes]:
    return pick.positions.tobytes(), pick.limits.tobytes(), pick.tops.tobytes()


def _kit(nc: NeuroncoreCounters, es: ExecutionStats, mu: MemoryUsed, topology: Topology, n: int, device: int) -> Any:
    """What the helper's ``application`` takes that does not change from call to call (see _native.c), for an
    application with ``n`` physical cores on ``device``; None for a core shape the helper does not build."""
    lnc, per_device, breakdown, group_name, phys_names = nc._shape_of(topology)
    if lnc == 2 and breakdown:
        names: tuple[str | None, ...] = (group_name, phys_names[0], phys_names[1])
    elif lnc == 1:
        names = (None, None, None)
    else:
        names = ()
    if not names:
        kit = None
    else:
        es_pick = es._tracker.pick_for(n)
        kit = (
            *_pick_bytes(nc._tracker.pick_for(n)),
            es_pick.positions.tobytes(),
            es_pick.often,
            es_pick.limits.tobytes(),
            es_pick.tops.tobytes(),
            *_pick_bytes(mu._tracker.pick_for(n)),
            es_collector.latency_positions(n).tobytes(),
            array("I", positions_of(MEM_COUNTERS, n)).tobytes(),
            n,
            nc_collector.MAX_MACS,
            nc_collector.CORE_KEYS,
            device * per_device,
            *names,
            *es_collector.SUMMARY_NAMES,
        )
    if len(_KITS) >= _MAX_KITS:
        _KITS.clear()
    _KITS[(id(topology), n, device)] = (topology, kit)  # the topology kept: its id is not reused while it is here
    return kit


def collect_application_native(nc: NeuroncoreCounters, es: ExecutionStats, mu: MemoryUsed, app: App) -> Bodies | None:
    """The bodies of neuroncore_counters, execution_stats and memory_used for ``app`` (a present application) by
    one call of the compiled helper, each group's state updated as its own ``collect`` would; None, with nothing
    changed, outside the usual case (see the module's docstring): the groups' own paths then run for it."""
    if NATIVE is None:
        return None
    data = app.data
    if type(data) is not AppData or len(data.devices) != 1:
        return None
    ((index, dd),) = data.devices.items()
    if dd.final:
        return None
    pid = app.pid
    t1, t2, t3 = nc._tracker, es._tracker, mu._tracker  # the trackers' state, read and kept as `step` does
    s1, s2, s3 = t1._prev.get(pid), t2._prev.get(pid), t3._prev.get(pid)
    if s1 is None or s2 is None or s3 is None or t1._rebase or t2._rebase or t3._rebase:
        return None  # a first look, or a rebase pending somewhere: the groups' own paths
    p1, p2, p3 = s1.get(index), s2.get(index), s3.get(index)
    if p1 is None or p2 is None or p3 is None:
        return None
    base, prev_t, _ = p1
    if p2[0] is not base or p3[0] is not base or p2[1] != prev_t or p3[1] != prev_t:
        return None  # the groups were not collected together last time: each steps from its own reading
    reading = dd.reading
    cur = reading.counters
    n = len(cur) // N
    if n == 0 or len(base) != len(cur) or len(cur) % N:
        return None
    topology = data.topology
    kept = _KITS.get((id(topology), n, index))
    kit = kept[1] if kept is not None and kept[0] is topology else _kit(nc, es, mu, topology, n, index)
    if kit is None:
        return None
    now = reading.time
    dt = max(0.0, now - prev_t)
    cached = mu._cache.get(pid)
    mem_prev = None
    if cached is not None and len(cached[2]) == 1 and cached[2][0][0] == index:
        mem_prev = cached[2][0][5]  # the reading memory_used's cached body was made from
    got = NATIVE.application(cur, base, mem_prev, dt, kit, nc._in_use.get(pid))
    if got is None:
        return None
    in_use, summary, busy, same = got
    try:  # first: anything else it raises leaves the trackers as they were (see collect_applications)
        mu_body: dict[str, Any] = mu.body_after_step(pid, data, ((index, busy),), same)
    except ImplausibleValue as e:  # as DataBlockGroup.collect words it
        mu_body = {"error": str(e)}
    look = (cur, now, None)  # each tracker's step keeps the reading it looked at (nothing picked: the helper ran)
    s1[index] = s2[index] = s3[index] = look
    nc._in_use[pid] = in_use
    period = nc.period_of(dt)
    es._rounded = nc._rounded  # what es.period_of(dt) would keep: the same interval, the same rounding
    nc_body: dict[str, Any] = {NC.NEURONCORES_IN_USE: in_use, NC.PERIOD: period}
    summary[ES.PERIOD] = period
    return nc_body, summary, mu_body


def collect_application_careful(
    nc: NeuroncoreCounters, es: ExecutionStats, mu: MemoryUsed, app: App
) -> tuple[dict[str, Any] | None, ...]:
    """The twin: each group's own ``collect`` for the one application (None where a group leaves it out)."""
    return tuple(group.collect([app], []).get(app.pid) for group in (nc, es, mu))


def data_block_groups(
    groups: Mapping[str, RuntimeGroup],
) -> tuple[NeuroncoreCounters, ExecutionStats, MemoryUsed] | None:
    """The three groups of a scope when it has all three, as themselves (not stand-ins); else None."""
    nc, es, mu = (groups.get(name) for name in NAMES)
    if type(nc) is NeuroncoreCounters and type(es) is ExecutionStats and type(mu) is MemoryUsed:
        return nc, es, mu
    return None


def collect_applications(groups: Mapping[str, RuntimeGroup], apps: Iterable[App]) -> dict[str, dict[int, Any]]:
    """For a scope whose three data-block groups are due together: each group's bodies of the applications the
    compiled call took, by group name then pid (an application it declined is in none of them). Empty when the
    scope lacks one of the groups or the helper is not built."""
    if NATIVE is None:  # pure mode: nothing to do per collection
        return {}
    trio = data_block_groups(groups)
    if trio is None:
        return {}
    nc, es, mu = trio
    out: tuple[dict[int, Any], dict[int, Any], dict[int, Any]] = ({}, {}, {})
    for app in apps:
        try:
            bodies = collect_application_native(nc, es, mu, app)
        except Exception:  # a bug: the groups' own paths run for it and word what goes wrong there
            log.debug("the compiled call for pid %d failed", app.pid, exc_info=True)
            continue
        if bodies is not None:
            pid = app.pid
            out[0][pid] = bodies[0]
            out[1][pid] = bodies[1]
            out[2][pid] = bodies[2]
    return dict(zip(NAMES, out, strict=True))
