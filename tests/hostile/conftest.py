"""Fixtures of the hostile suite: both modes of the compiled helper."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest

from neuron_monitor.native import NATIVE

# every module that imports the helper by name (neuron_monitor/native.py lists its callers)
HELPER_USERS = (
    "neuron_monitor.neuron.deltas",
    "neuron_monitor.groups.neuroncore_counters.collector",
    "neuron_monitor.groups.execution_stats.collector",
    "neuron_monitor.groups.vcpu_usage.collector",
    "neuron_monitor.groups.neuron_runtime_vcpu_usage.collector",
)


@pytest.fixture(params=["native", "pure"])
def helper_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Runs the test with the compiled helper (skipped where it is not built) and with the pure-Python twins
    only, as ``NEURON_MONITOR_NO_NATIVE=1`` does."""
    if request.param == "native":
        if NATIVE is None:
            pytest.skip("the compiled helper is not built here (or NEURON_MONITOR_NO_NATIVE is set)")
    else:
        for name in HELPER_USERS:
            monkeypatch.setattr(importlib.import_module(name), "NATIVE", None)
    yield request.param
