"""Runtime group ``neuroncore_counters``: per NeuronCore utilization and FLOPS of each application.

Reads the per-core TIME_IN_USE (µs) and MAC_COUNT counters of the app's data blocks (neuron/apps.py) and returns
``neuroncores_in_use`` keyed by the flat logical core index (device x cores per device + core):
``neuroncore_utilization`` = Δ time in use / Δ wall time x 100 (for a logical core: the mean of its physical
cores), ``flops`` = 2 x Δ MACs / Δ wall time (summed over its physical cores). A rate above ``MAX_FLOPS`` per
physical core (10,000 times a real one) can only come from a damaged counter: that core's ``flops`` is left out
of the period's entry rather than reported (a 64-bit counter jump over 0.1 s is a number JSON encoders refuse,
which would otherwise stop the daemon's report). With logical cores (LNC=2, e.g.
trn2 "v3d") each entry also carries the physical breakdown as AWS prints it: ``"v3d": {"nc_v3.0":
{"neuroncore_utilization": ..}, "nc_v3.1": {..}}``. The body's keys: body.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from neuron_monitor.groups.data_block_group import DataBlockGroup
from neuron_monitor.groups.neuroncore_counters import body as B
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.native import NATIVE
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.app import App
from neuron_monitor.neuron.apps import AppData
from neuron_monitor.neuron.deltas import DeltaTracker, DeviceDelta, cores_in_use
from neuron_monitor.neuron.hardware import Topology
from neuron_monitor.schema.spec import MAX_FLOPS

_INDICES = (L.NC_TIME_IN_USE, L.NC_MAC_COUNT)
_Shape = tuple[int, int, bool, str, tuple[str, ...]]
_KEYS = tuple(str(k) for k in range(L.MAX_CORES * 64))  # flat core index -> key string (64 devices' worth)
CORE_KEYS = _KEYS
MAX_MACS = MAX_FLOPS / 2  # MACs per second of one physical core beyond which its counter is taken as damaged


class NeuroncoreCounters(DataBlockGroup):
    type_name = "neuroncore_counters"

    def __init__(self, root: RootFS) -> None:
        super().__init__(root, DeltaTracker(_INDICES))
        self._shape: tuple[Topology, _Shape] | None = None  # the last topology and what follows from it
        self._in_use: dict[int, dict[str, Any]] = {}  # pid -> its last neuroncores_in_use, updated in place
        self._kept: dict[int, KeptPairs] = {}  # pid -> that answer's dicts as cores_careful built them, if it did

    def _shape_of(self, topo: Topology) -> _Shape:
        """(LNC, logical cores per device, physical breakdown shown, its key, physical core names) of a topology."""
        if self._shape is None or self._shape[0] is not topo:
            lnc = max(1, topo.lnc)
            version = topo.chip.core_version if topo.chip else ""
            breakdown = lnc > 1 and bool(version)
            names = tuple(f"nc_{version}.{i}" for i in range(lnc)) if breakdown else ()
            self._shape = (topo, (lnc, topo.logical_cores, breakdown, f"{version}d", names))
        return self._shape[1]

    def _forget(self, pid: int) -> None:
        super()._forget(pid)
        self._in_use.pop(pid, None)
        self._kept.pop(pid, None)

    def in_use(self, pid: int) -> dict[str, Any] | None:
        """This application's last ``neuroncores_in_use`` (the next one of the same shape is written into it)."""
        return self._in_use.get(pid)

    def _body(self, app: App) -> dict[str, Any]:
        data = app.data
        if not isinstance(data, AppData):
            return {B.NEURONCORES_IN_USE: {}}
        shape = self._shape_of(data.topology)
        steps = self._tracker.step(app)
        in_use = None
        if len(steps) == 1:
            in_use = cores_native(steps, shape, self._in_use.get(app.pid))
        if in_use is None:
            kept = self._kept.get(app.pid)
            if kept is None:
                kept = self._kept[app.pid] = KeptPairs()
            elif kept.answer is not self._in_use.get(app.pid):  # replaced since (by the helper): built anew
                kept.answer = None
            in_use = cores_careful(steps, shape, kept)
        self._in_use[app.pid] = in_use
        body: dict[str, Any] = {B.NEURONCORES_IN_USE: in_use}  # NeuroncoreCountersBody (body.py)
        period = self._period(steps)
        if period is not None:
            body[B.PERIOD] = period
        return body


def cores_native(steps: list[DeviceDelta], shape: _Shape, reuse: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """`cores_careful` by the compiled helper for the usual case: one device, each of its physical cores busy
    during a period that has a length, no MAC count past what a core can do, deltas up to 2^53 (exact as doubles);
    on LNC=2 chips with the physical breakdown (Trn2) the cores in pairs, on chips whose cores are not grouped
    (LNC=1: Trn1, Inf2) each core its own entry. The dicts are built in C, the floats made from the same IEEE
    operations in the same order as the careful twin. None when the helper is not built or that case does not
    hold: `cores_careful` then decides.

    ``reuse``: this application's previous ``neuroncores_in_use``. When it has exactly the shape of the answer
    (the same cores, keys and order: the usual case, one collection after another), its values are replaced in
    place and it is returned, so no dict is made or freed (about 290 per report on a trn2.48xlarge with 16
    runtimes; see docs/performance.md). The previous report was encoded before this collection started."""
    lnc, per_device, breakdown, group_name, phys_names = shape
    device, _dd, dt, n, deltas = steps[0]
    if NATIVE is None:
        return None
    cores: dict[str, Any] | None
    if lnc == 2 and breakdown:
        cores = NATIVE.cores(
            deltas, n, dt, MAX_MACS * dt, _KEYS, device * per_device, group_name, phys_names[0], phys_names[1], reuse
        )
    elif lnc == 1:
        cores = NATIVE.cores(deltas, n, dt, MAX_MACS * dt, _KEYS, device * per_device, None, None, None, reuse)
    else:
        return None
    return cores


class KeptPairs:
    """An application's last ``neuroncores_in_use`` as `cores_careful` built it in the usual Trn2 case (one device,
    LNC=2 with the physical breakdown, every core in use, every rate present, a period with a length), and its dicts
    in order (each logical core's entry, then its two physical cores'), so that the next answer of the same shape
    (the same device, core count and topology shape) is written into it, as the helper's `cores` does with its
    ``reuse``: no dict made or freed (17 per trn2 application and report). ``answer`` None: nothing kept."""

    __slots__ = ("answer", "dicts", "key")

    def __init__(self) -> None:
        self.answer: dict[str, Any] | None = None
        self.key: tuple[int, int, _Shape] | None = None
        self.dicts: tuple[dict[str, Any], ...] = ()


@lru_cache(maxsize=16)
def _logical_cores(n: int, lnc: int) -> tuple[range, ...]:
    """The physical cores of each logical core of a device with ``n`` physical cores, ``lnc`` to a logical one."""
    return tuple(range(k, k + lnc) for k in range(0, n, lnc))


def cores_careful(steps: list[DeviceDelta], shape: _Shape, kept: KeptPairs | None = None) -> dict[str, Any]:
    """``neuroncores_in_use`` from the per-device deltas of TIME_IN_USE and MAC_COUNT: every core the app uses on
    each device (see `cores_in_use`), keyed by its flat logical index as a string, in ascending order.

    ``kept``: this application's `KeptPairs` (its previous answer, when it was this function's own in the usual
    Trn2 case and nothing replaced it since). An answer of that case and the same shape is written into the kept
    dicts and the kept answer returned; otherwise the answer is built, and kept when it is of that case."""
    lnc, per_device, breakdown, group_name, phys_names = shape
    if kept is not None:
        pairs = _pairs(steps, shape)
        if pairs is None:
            kept.answer = None
        else:
            key, pair_utils, pair_flops = pairs
            if kept.answer is not None and kept.key == key:
                dicts = kept.dicts
                for k in range(0, len(pair_utils), 2):  # logical core k // 2: entry dicts[3k/2], members after it
                    ua, ub = pair_utils[k], pair_utils[k + 1]
                    logical, da, db = dicts[3 * k // 2 : 3 * k // 2 + 3]
                    logical[B.NEURONCORE_UTILIZATION] = (ua + ub) / 2  # as the pair branch below computes it
                    logical[B.FLOPS] = pair_flops[k] + pair_flops[k + 1]
                    da[B.NEURONCORE_UTILIZATION] = ua
                    db[B.NEURONCORE_UTILIZATION] = ub
                return kept.answer
            answer = cores_careful(steps, shape)
            kept.answer, kept.key = answer, key
            kept.dicts = tuple(d for e in answer.values() for d in (e, *e[group_name].values()))
            return answer
    cores: dict[int, dict[str, Any]] = {}
    for device, dd, dt, n, deltas in steps:
        busy, macs = deltas[:n], deltas[n:]  # per physical core: TIME_IN_USE, MAC_COUNT
        utils: list[float]
        flops: list[int | None]
        if dt > 0:
            utils, flops = _core_rates(busy, macs, dt)
        else:
            utils, flops = [0.0] * n, [0] * n
        first = device * per_device
        used = cores_in_use(dd, busy)
        if lnc == 1:  # the mean and sum of one physical core are its own values
            for phys in used:
                entry: dict[str, Any] = {B.NEURONCORE_UTILIZATION: utils[phys], B.FLOPS: flops[phys]}
                if entry[B.FLOPS] is None:
                    del entry[B.FLOPS]
                cores[first + phys] = entry
            continue
        if len(used) == n and n % lnc == 0:  # every core in use: logical core k is physical k*lnc..
            members: Any = _logical_cores(n, lnc)
        else:
            grouped: dict[int, list[int]] = {}
            for phys in used:
                grouped.setdefault(phys // lnc, []).append(phys)
            members = grouped.values()
        for physical in members:  # one logical core: its physical cores' mean utilization, summed FLOPS, breakdown
            if len(physical) == 2:  # a pair (LNC=2, both in use: the usual case), in one display each
                a, b = physical
                ua, ub, fa, fb = utils[a], utils[b], flops[a], flops[b]
                # (ua + ub) / 2 is sum([ua, ub]) / 2: the same IEEE operations (0.0 + ua is ua: no share is -0.0)
                entry = {B.NEURONCORE_UTILIZATION: (ua + ub) / 2}
                if fa is not None and fb is not None:
                    entry[B.FLOPS] = fa + fb
                if breakdown:
                    entry[group_name] = {
                        phys_names[a % lnc]: {B.NEURONCORE_UTILIZATION: ua},
                        phys_names[b % lnc]: {B.NEURONCORE_UTILIZATION: ub},
                    }
                cores[first + a // lnc] = entry
                continue
            shares: list[float] = []
            rates: list[int | None] = []
            per_core: dict[str, dict[str, float]] = {}
            for p in physical:  # one plain loop: cheaper than three comprehensions of two items each
                shares.append(utils[p])
                rates.append(flops[p])
                if breakdown:
                    per_core[phys_names[p % lnc]] = {B.NEURONCORE_UTILIZATION: utils[p]}
            entry = {B.NEURONCORE_UTILIZATION: sum(shares) / len(shares)}
            if None not in rates:
                entry[B.FLOPS] = sum(rates)
            if breakdown:
                entry[group_name] = per_core
            cores[first + physical[0] // lnc] = entry
    keys = _KEYS if not cores or max(cores) < len(_KEYS) else [str(k) for k in range(max(cores) + 1)]
    return {keys[k]: cores[k] for k in sorted(cores)}


def _pairs(steps: list[DeviceDelta], shape: _Shape) -> tuple[tuple[int, int, _Shape], list[float], list[int]] | None:
    """For `KeptPairs`' case (one device, LNC=2 with the breakdown, every core busy, every rate present, a period
    with a length): (the answer's shape key, each physical core's utilization and FLOPS, as `cores_careful`
    computes them); None otherwise."""
    lnc, _per_device, breakdown, _group_name, _phys_names = shape
    if len(steps) != 1 or lnc != 2 or not breakdown:
        return None
    device, _dd, dt, n, deltas = steps[0]
    busy, macs = deltas[:n], deltas[n:]
    if dt <= 0 or not n or n % 2 or len(macs) != n or not all(busy):  # all busy: cores_in_use gives every core
        return None
    utils, flops = _core_rates(busy, macs, dt)
    rates = [f for f in flops if f is not None]
    if len(rates) != n:  # a refused MAC count: that core has no FLOPS
        return None
    return (device, n, shape), utils, rates


def _core_rates(busy: Sequence[int], macs: Sequence[int], dt: float) -> tuple[list[float], list[int | None]]:
    """Each physical core's utilization (percent, at most 100) and FLOPS (None past ``MAX_MACS``: a damaged
    counter) from its TIME_IN_USE and MAC_COUNT deltas over ``dt`` seconds (> 0)."""
    scale, most = dt * 1e4, MAX_MACS * dt
    utils = [u if (u := b / scale) < 100.0 else 100.0 for b in busy]  # min(100.0, b / scale)
    return utils, [int(2 * m / dt) if m <= most else None for m in macs]


GROUP = NeuroncoreCounters
