"""Per-physical-core utilization reaches the CloudWatch mapping on trn2 (``v3d``) and trn3 (``v4d``) reports."""

from __future__ import annotations

import pytest

from neuron_monitor.exporters.cloudwatch.mapping import ReportMapper
from neuron_monitor.groups.neuroncore_counters import body as NCB
from neuron_monitor.schema import names as N
from tests.schema.conftest import simulated_report


@pytest.mark.parametrize(("shape", "key"), [("trn2.48xlarge", "v3d"), ("trn3.48xlarge", "v4d")])
def test_every_physical_core_is_sent(shape: str, key: str) -> None:
    report = simulated_report(shape)
    expected = {}
    for rt in report[N.NEURON_RUNTIME_DATA]:
        for core, data in rt["report"][N.NEURONCORE_COUNTERS][NCB.NEURONCORES_IN_USE].items():
            for name, pdata in data[key].items():
                expected[(rt["neuron_runtime_tag"], core, name)] = pdata["neuroncore_utilization"]
    got = {}
    for d in ReportMapper().map(report):
        if d.name == "PhysicalNeuronCoreUtilization":
            dims = dict(d.dims)
            assert d.unit == "Percent"
            got[(dims["RuntimeTag"], dims["NeuronCore"], dims["PhysicalNeuronCore"])] = d.value
    assert len(expected) >= 64
    assert got == expected
