"""The simulator's varying workload (option "vary"): phases, ramps, bursts and idle gaps, the same for a seed."""

from __future__ import annotations

from neuron_monitor.sim.workload import Activity


def _curve(seed: int, index: int, seconds: int = 1800) -> list[float]:
    a = Activity(seed, index)
    return [a.level(t / 2) for t in range(seconds * 2)]


def test_the_same_seed_gives_the_same_curve_and_another_seed_another() -> None:
    assert _curve(7, 0) == _curve(7, 0)
    assert _curve(7, 0) != _curve(8, 0)
    assert _curve(7, 0) != _curve(7, 1)


def test_the_curve_has_idle_gaps_bursts_and_levels_between() -> None:
    for seed in range(5):
        curve = _curve(seed, 0)
        assert all(0.0 <= v <= 1.0 for v in curve)
        assert 0.0 in curve  # an idle gap
        assert curve.count(1.0) > 4  # a burst (or the first full-load phase)
        assert len({round(v, 2) for v in curve}) > 10  # phases and ramps at many levels
        assert curve[0] == 1.0  # it starts at the planned load


def test_memory_stays_constant_however_long_it_runs() -> None:
    a = Activity(1, 2)
    a.level(1e6)  # ~10^5 segments later
    assert 0.0 <= a.level(1e6 + 1) <= 1.0
    assert len(vars(a)) == 2
