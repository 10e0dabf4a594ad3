"""The simulator's ``pause`` holds every level still: counts and memory in use, so a capture taken while paused
compares exactly with its replay (tests/capture/test_capture.py). Before: memory in use drifted for paused runtimes
too, every ``memory_interval``; a capture that took over 5 s on a starved machine then saw a level in its report
that its copied blocks no longer held. Simulated time, stepped by the test: nothing depends on the wall clock."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from neuron_monitor.sim.animator import Simulator
from neuron_monitor.sim.shapes import get_shape

OPTIONS = {"load_time": 0.0, "worker_cpu": 0, "ecc_rate": 0, "memory_interval": 0.1, "truth_interval": 1e9}


def _levels(sim: Simulator) -> list[Any]:
    return [copy.deepcopy((rt.host_mem, rt.core_mem)) for rt in sim.runtimes]


def _steps(sim: Simulator, now: float, n: int) -> float:
    for _ in range(n):
        now += 0.05
        sim.step(now)
    return now


def test_memory_in_use_drifts_while_running_and_holds_still_while_paused(tmp_path: Path) -> None:
    sim = Simulator(tmp_path / "root", get_shape("trn2.48xlarge"), 3, 11, dict(OPTIONS))
    try:
        now = _steps(sim, sim.t0, 10)
        before = _levels(sim)
        now = _steps(sim, now, 40)  # 20 memory steps while running
        assert _levels(sim) != before  # the drift this test would otherwise never see stop
        sim.apply({"kind": "pause"})
        paused = _levels(sim)
        now = _steps(sim, now, 40)
        assert _levels(sim) == paused
        sim.apply({"kind": "resume"})
        _steps(sim, now, 40)
        assert _levels(sim) != paused
    finally:
        sim.shutdown()
