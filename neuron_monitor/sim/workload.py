"""The simulated workload, decided up front from the shape, the options and the seed (same seed, same workload).

`plan_runtimes(shape, count, options, rng)` places ``count`` runtimes on the devices (one or more whole devices
each when there are fewer runtimes than devices, otherwise disjoint groups of logical cores) and gives each its
tag, models, execution rate, utilization, latency range, error rates and memory footprint.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from neuron_monitor.neuron import layout as L
from neuron_monitor.sim.datastore import ModelRecord
from neuron_monitor.sim.shapes import Shape

MIB = 1024**2


@dataclass
class RuntimePlan:
    index: int
    tag: str | None  # None: NEURON_PROCESS_TAG unset (the runtime's tag is its pid)
    cores: dict[int, list[int]]  # device -> physical cores owned
    exec_rate: float  # executions per second per physical core
    utilization: float  # busy fraction of each owned core while running
    latency_us: tuple[int, int]  # device latency range; total latency adds 5-15 %
    macs_per_us: int  # MAC operations per busy microsecond
    error_rates: dict[str, float]  # per execution: generic, numerical, timeout, failed_to_queue, hardware
    host_mem: dict[int, int]  # ND counter -> bytes
    core_mem: dict[int, int]  # NC memory counter -> bytes, per owned core
    models: dict[int, list[ModelRecord]] = field(default_factory=dict)  # device -> records
    start_at: float = 0.0
    stop_at: float | None = None


def _split_cores(shape: Shape, count: int) -> list[dict[int, list[int]]]:
    if count <= 0:
        return []  # an idle host: devices, no application
    if count <= shape.devices:
        groups: list[dict[int, list[int]]] = [{} for _ in range(count)]
        for dev in range(shape.devices):
            groups[dev * count // shape.devices][dev] = list(range(shape.phys_cores))
        return groups
    logical_total = shape.devices * shape.logical_cores
    count = min(count, logical_total)
    groups = [{} for _ in range(count)]
    for lc in range(logical_total):
        owner = lc * count // logical_total
        dev, local = divmod(lc, shape.logical_cores)
        phys = list(range(local * shape.lnc, (local + 1) * shape.lnc))
        groups[owner].setdefault(dev, []).extend(phys)
    return groups


ERROR_RATE_OPTIONS = {
    "generic": "generic_error_rate",
    "numerical": "numerical_error_rate",
    "timeout": "timeout_rate",
    "failed_to_queue": "failed_to_queue_rate",
    "hardware": "hardware_error_rate",
}
BACKGROUND_ERROR_RATES = {"generic": 0.002, "numerical": 0.0005, "timeout": 0.0002, "failed_to_queue": 0.0005}
"""Per-execution error probabilities with option ``errors`` (applications that fail now and then). Without it no
execution fails unless a rate option or a fault command asks: the healthy simulator is healthy."""


def error_rates(options: dict[str, Any]) -> dict[str, float]:
    """Each error kind's per-execution probability: its rate option, else the background rate with ``errors``,
    else 0."""
    background = BACKGROUND_ERROR_RATES if options.get("errors") else {}
    return {kind: float(options.get(opt, background.get(kind, 0.0))) for kind, opt in ERROR_RATE_OPTIONS.items()}


def plan_runtimes(shape: Shape, count: int, options: dict[str, Any], rng: random.Random) -> list[RuntimePlan]:
    tags: list[str | None] = list(options.get("tags") or [])
    plans = []
    for i, cores in enumerate(_split_cores(shape, count)):
        tag = tags[i] if i < len(tags) else f"job-{i:02d}"
        lo = int(options.get("latency_us", (0, 0))[0]) or rng.randint(800, 3000)
        hi = int(options.get("latency_us", (0, 0))[1]) or lo + rng.randint(100, 2000)
        util = options.get("utilization")
        plan = RuntimePlan(
            index=i,
            tag=tag,
            cores=cores,
            exec_rate=float(options.get("exec_rate") or rng.choice((20.0, 50.0, 100.0, 200.0))),
            utilization=float(util) if util is not None else round(rng.uniform(0.2, 0.95), 3),
            latency_us=(lo, max(lo, hi)),
            macs_per_us=rng.choice((2_000_000, 8_000_000, 30_000_000)),
            error_rates=error_rates(options),
            host_mem={
                L.ND_MEM_CODE_HOST: rng.randint(1, 16) * MIB,
                L.ND_MEM_TENSORS_HOST: rng.randint(0, 64) * MIB,
                L.ND_MEM_CONSTANTS_HOST: rng.randint(0, 8) * MIB,
                L.ND_MEM_MISC_HOST: rng.randint(100, 2000) * MIB,
            },
            core_mem={
                L.NC_MEM_CODE_DEVICE: rng.randint(16, 256) * MIB,
                L.NC_MEM_TENSORS_DEVICE: rng.randint(8, 512) * MIB,
                L.NC_MEM_CONSTANTS_DEVICE: rng.randint(0, 2048) * MIB,
                L.NC_MEM_SCRATCHPAD_DEVICE: rng.randint(0, 256) * MIB,
                L.NC_MEM_MISC_DEVICE: rng.randint(0, 64) * MIB,
            },
        )
        plan.models = _models(plan, rng)
        plans.append(plan)
    return plans


def _models(plan: RuntimePlan, rng: random.Random) -> dict[int, list[ModelRecord]]:
    """One or two models per runtime; each has a subgraph on every core it owns on each device."""
    out: dict[int, list[ModelRecord]] = {}
    n_models = rng.randint(1, 2)
    for m in range(n_models):
        model_id = 10001 + m
        uuid = rng.randbytes(16)
        name = f"/var/tmp/neuron-compile-cache/MODULE_{rng.getrandbits(60)}/model_{plan.index}_{m}.neff"
        for dev, cores in plan.cores.items():
            for sg, core in enumerate(cores[:: max(1, len(cores) // 2)]):
                out.setdefault(dev, []).append(
                    ModelRecord(
                        model_id=model_id,
                        node_id=sg,
                        name=name,
                        uuid=uuid,
                        nc_index=core,
                        sg_index=sg,
                        host={L.MEM_SLOT_MISC: rng.randint(1, 64) * 4096, L.MEM_SLOT_CODE: rng.randint(0, 4) * 4096},
                        device={
                            L.MEM_SLOT_CONSTANTS: rng.randint(0, 512) * 4096,
                            L.MEM_SLOT_CODE: rng.randint(1, 64) * 4096,
                            L.MEM_SLOT_TENSORS: rng.randint(0, 16) * 4096,
                        },
                    )
                )
    return out


# ---- a workload that varies over time (option "vary": the live demo's; off by default, so seeds keep their output)
ACTIVITY_KINDS = ("steady", "ramp", "burst", "idle")


@dataclass(frozen=True)
class Segment:
    start: float  # seconds since the simulator started
    end: float
    kind: str  # one of ACTIVITY_KINDS
    level: float  # activity at the start (0..1)
    level_end: float  # activity at the end (a ramp moves between them; others hold ``level``)


class Activity:
    """One runtime's activity over time, a factor 0..1 of its planned utilization and execution rate: phases of
    steady work at different levels, ramps between them, short bursts at full load and idle gaps. The segments
    come from a generator seeded by (seed, runtime index), so the same seed gives the same curve; only the
    current segment is kept, so memory stays constant however long the simulator runs."""

    def __init__(self, seed: int, index: int) -> None:
        self._rng = random.Random(f"activity-{seed}-{index}")
        self._segment = Segment(0.0, self._rng.uniform(5.0, 20.0), "steady", 1.0, 1.0)

    def _next(self, prev: Segment) -> Segment:
        rng = self._rng
        kind = rng.choices(ACTIVITY_KINDS, weights=(4, 3, 2, 2))[0]
        start = prev.end
        if kind == "burst":
            return Segment(start, start + rng.uniform(2.0, 6.0), kind, 1.0, 1.0)
        if kind == "idle":
            return Segment(start, start + rng.uniform(3.0, 15.0), kind, 0.0, 0.0)
        if kind == "ramp":
            return Segment(start, start + rng.uniform(5.0, 20.0), kind, prev.level_end, rng.uniform(0.1, 1.0))
        level = rng.uniform(0.3, 1.0)
        return Segment(start, start + rng.uniform(10.0, 40.0), kind, level, level)

    def level(self, t: float) -> float:
        """The activity at ``t`` seconds since the start (``t`` never goes back in a simulator)."""
        seg = self._segment
        while t >= seg.end:
            seg = self._segment = self._next(seg)
        if seg.kind != "ramp" or seg.end <= seg.start:
            return seg.level
        f = max(0.0, min(1.0, (t - seg.start) / (seg.end - seg.start)))
        return seg.level + (seg.level_end - seg.level) * f
