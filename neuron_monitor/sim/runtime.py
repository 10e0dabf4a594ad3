"""A simulated Neuron application while it runs: its worker process, NDS slots and what it has done so far."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field

from neuron_monitor.neuron import layout as L
from neuron_monitor.sim.datastore import SlabWriter
from neuron_monitor.sim.workload import RuntimePlan

# the runtime's execution counters (ground truth names) and their index in the data block's counters
COUNTER_INDEX: dict[str, int] = dict(L.EXECUTION_SUMMARY + L.ERROR_SUMMARY)


@dataclass
class Runtime:
    plan: RuntimePlan
    proc: subprocess.Popen[bytes]
    pid: int
    tag: str
    state: str = "running"  # running | hung | paused | stopped
    ready_at: float = 0.0  # models load until then: no executions, no busy time
    slots: dict[int, int] = field(default_factory=dict)
    writers: dict[int, SlabWriter] = field(default_factory=dict)
    mirror: dict[tuple[int, int, int], int] = field(default_factory=dict)  # absolute slab values
    base: dict[tuple[int, int, int], int] = field(default_factory=dict)  # slab values at attach
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTER_INDEX, 0))
    busy: dict[tuple[int, int], float] = field(default_factory=dict)
    busy_written: dict[tuple[int, int], int] = field(default_factory=dict)
    macs: dict[tuple[int, int], int] = field(default_factory=dict)
    exec_acc: dict[tuple[int, int], float] = field(default_factory=dict)
    err_acc: dict[str, float] = field(default_factory=dict)
    activity: float = 1.0  # share of the planned load now (option "vary"; always 1.0 without it)
    host_mem: dict[int, dict[int, int]] = field(default_factory=dict)  # device -> ND counter -> bytes
    core_mem: dict[tuple[int, int], dict[int, int]] = field(default_factory=dict)

    def core_keys(self) -> list[tuple[int, int]]:
        return [(d, c) for d, cores in self.plan.cores.items() for c in cores]
