"""DataBlockGroup._period: the plain formula (longest interval, rounded to 9 digits) however the rounding is kept."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from neuron_monitor.groups.data_block_group import DataBlockGroup
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.app import App
from neuron_monitor.neuron.deltas import DeltaTracker


class _Group(DataBlockGroup):
    def _body(self, app: App) -> dict[str, Any] | None:
        return None


def plain_period(dts: list[float]) -> float | None:
    period = max(dts, default=0.0)
    return round(period, 9) if period > 0 else None


intervals = st.one_of(
    st.sampled_from([0.0, 0.1, 0.1000000004, 0.1000000006, 1e-10, 2.5e-10, 5e-10, 1.0]),
    st.floats(min_value=0.0, max_value=1e6, allow_nan=False),
)


@given(st.lists(st.lists(intervals, max_size=3), max_size=12))
def test_period_is_the_plain_formula_over_a_run(runs: list[list[float]]) -> None:
    group = _Group(RootFS("/"), DeltaTracker((0,)))
    for dts in runs:
        steps: Any = [(0, None, dt, 1, []) for dt in dts]
        assert group._period(steps) == plain_period(dts)
