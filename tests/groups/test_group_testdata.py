"""Each Neuron group's captured test data (``neuron_monitor/groups/<name>/testdata/``) through its collector or spec.

Device groups: the sysfs files their collector reads, in the driver's formats (docs/neuron-data.md), laid out under
a temporary root and collected. Runtime groups: two reads of a runtime's data block 1 s apart (the driver's layout,
neuron/layout.py) parsed and collected. Runtime groups and neuron_hw_counters: the group object of AWS's own real
report (aws/amazon-cloudwatch-agent-test's trn1n.32xlarge line, tests/fixtures/reports/README.md) read through the
spec.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from neuron_monitor.groups.execution_stats import spec as execution_spec
from neuron_monitor.groups.execution_stats.collector import ExecutionStats
from neuron_monitor.groups.memory_used import spec as memory_spec
from neuron_monitor.groups.memory_used.collector import MemoryUsed
from neuron_monitor.groups.neuron_device_health.collector import NeuronDeviceHealth
from neuron_monitor.groups.neuron_device_telemetry.collector import NeuronDeviceTelemetry
from neuron_monitor.groups.neuron_hw_counters import spec as hw_spec
from neuron_monitor.groups.neuron_hw_counters.collector import NeuronHwCounters
from neuron_monitor.groups.neuroncore_counters import spec as ncc_spec
from neuron_monitor.groups.neuroncore_counters.collector import NeuroncoreCounters
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.app import App
from neuron_monitor.neuron.apps import AppData, DeviceData
from neuron_monitor.neuron.appsinfo import AppInfo
from neuron_monitor.neuron.datablock import BlockParser, BlockReading
from neuron_monitor.schema.values import Problems
from tests.conftest import group_testdata, lay_out_sysfs
from tests.neuron.appdata import TRN2

SYSFS = "sysfs_trn2_neuron0.txt"
DEVICE0 = "sys/devices/virtual/neuron_device/neuron0"


MODEL_UUID = "91f2f66e83ea419dace1da07617ad39f"


def _block_reads(group: str) -> list[BlockReading]:
    """The two captured reads (t = 0 s and 1 s) of the runtime's data block on device 0 (8 physical cores)."""
    return [
        BlockParser(8).parse(gzip.decompress(group_testdata(group, f"datablock_trn2_t{t}.bin.gz").read_bytes()), t)
        for t in (0, 1)
    ]


def _collect(group: str, collector: Any) -> dict[str, Any]:
    """The runtime's body of the second period, as the daemon's app source would hand the reads to the group."""
    first, second = _block_reads(group)
    info = AppInfo(1234, 0, (MODEL_UUID,), 0, 0)
    data = AppData(1234, TRN2)
    data.devices[0] = DeviceData(0, first, first.counters, first.time, info)
    collector.collect([App(pid=1234, tag=first.tag, data=data, devices=(0,))], [])
    data.devices[0].reading = second
    body: dict[str, Any] = collector.collect([App(pid=1234, tag=second.tag, data=data, devices=(0,))], [])[1234]
    return body


def test_neuroncore_counters_data_block() -> None:
    core = _collect("neuroncore_counters", NeuroncoreCounters(RootFS("/")))["neuroncores_in_use"]
    assert core == {"0": {"neuroncore_utilization": 40.0, "flops": 10**12,  # busy 600 + 200 ms of 2 x 1 s
                          "v3d": {"nc_v3.0": {"neuroncore_utilization": 60.0},
                                  "nc_v3.1": {"neuroncore_utilization": 20.0}}}}  # fmt: skip


def test_execution_stats_data_block() -> None:
    body = _collect("execution_stats", ExecutionStats(RootFS("/")))
    assert body["execution_summary"]["completed"] == 50 and body["execution_summary"]["completed_with_num_err"] == 2
    assert body["error_summary"]["numerical"] == 2
    assert body["latency_stats"]["total_latency"]["p50"] == 0.0095
    assert body["latency_stats"]["device_latency"]["p99"] == 0.008


def test_memory_used_data_block() -> None:
    body = _collect("memory_used", MemoryUsed(RootFS("/")))
    used = body["neuron_runtime_used_bytes"]
    assert used["usage_breakdown"]["host"] == {"application_memory": 609656832, "constants": 0,
                                               "dma_buffers": 1048576, "tensors": 0}  # fmt: skip
    assert used["usage_breakdown"]["neuroncore_memory_usage"]["0"]["model_code"] == 101125344 + 32768
    (model,) = body["loaded_models"]
    assert (model["name"], model["uuid"], model["is_running"]) == ("bert", MODEL_UUID, True)
    sg = model["subgraphs"]["sg_00"]
    assert sg["memory_used_bytes"]["usage_breakdown"]["neuron_device"]["constants"] == 196608


def _aws(group: str, name: str = "aws_trn1n32xl_runtime0.json") -> tuple[dict[str, Any], Problems]:
    body = json.loads(group_testdata(group, name).read_text())
    return body, Problems()


def test_neuroncore_counters_aws_object() -> None:
    body, problems = _aws("neuroncore_counters")
    value = ncc_spec.read(body, "neuroncore_counters", problems)
    assert len(value.cores) == 32 and value.utilization()["6"] == 41.4 and not problems
    (util,) = [s for s in ncc_spec.gauges(value) if s[0] is ncc_spec.FAM_UTIL]
    assert util[2]["6"] / util[3] == 0.414  # served as a ratio
    facts = ncc_spec.runtime_facts(value, 5.0, 2)
    assert facts.cores_in_use == frozenset(range(32)) and facts.utilization is not None
    assert facts.utilization[6] == 41.4 and facts.utilization_period == 5.0


def test_execution_stats_aws_object() -> None:
    body, problems = _aws("execution_stats")
    value = execution_spec.read(body, "execution_stats", problems)
    assert not problems
    assert {f[0].kind: f[2] for f in execution_spec.findings(value)} == {"generic_error": 2}
    assert execution_spec.executions(value) == (2, 2)
    assert not list(execution_spec.gauges(value))  # null latencies: no percentile series
    assert execution_spec.runtime_facts(value, 5.0, 2).executions == 2


def test_memory_used_aws_object() -> None:
    body, problems = _aws("memory_used")
    value = memory_spec.read(body, "memory_used", problems)
    assert not problems
    assert (value.host, value.neuron_device) == (9043968, 3541303936)
    assert value.host_breakdown == {"application_memory": 655360, "constants": 0, "dma_buffers": 8388608, "tensors": 0}
    used = next(s for s in memory_spec.gauges(value) if s[0] is memory_spec.FAM_USED)
    assert used[2] == {"host": 9043968, "neuron_device": 3541303936}
    listed = body["loaded_models"]
    facts = memory_spec.runtime_facts(value, 5.0, 2)
    assert facts.models == len(listed) and facts.model_cores
    assert value.per_core is not None and value.per_core["0"]["model_code"] == 100752896


def test_neuron_hw_counters_aws_object_and_sysfs(tmp_path: Path) -> None:
    body, problems = _aws("neuron_hw_counters", "aws_trn1n32xl.json")
    value = hw_spec.read(body, "neuron_hw_counters", problems)
    assert not problems and len(value.devices) == 16
    counts = {c[1]: c[2] for c in hw_spec.counts(value, 1.0)}
    assert counts[("0",)]["mem_ecc_corrected"] == 1 and counts[("1",)]["mem_ecc_corrected"] == 0
    root = lay_out_sysfs("neuron_hw_counters", SYSFS, tmp_path)
    group = NeuronHwCounters(RootFS(root))
    group.prime()  # the counts so far (3 corrected HBM, 1 uncorrected SRAM) are history, not this period's
    (root / DEVICE0 / "stats/hardware/mem_ecc_corrected").write_text("5\n")
    (device,) = group.collect()["neuron_devices"]
    assert device == {"neuron_device_index": 0, "mem_ecc_corrected": 2, "mem_ecc_uncorrected": 0,
                      "sram_ecc_uncorrected": 0, "sram_ecc_corrected": 0}  # fmt: skip


def test_neuron_device_telemetry_sysfs(tmp_path: Path) -> None:
    group = NeuronDeviceTelemetry(RootFS(lay_out_sysfs("neuron_device_telemetry", SYSFS, tmp_path)))
    group.prime()
    (device,) = group.collect()["neuron_devices"]
    assert device["power"] == {"status": "VALID", "sample_time": 1795690000, "min_percent": 12.5,
                               "max_percent": 40.0, "avg_percent": 20.25}  # fmt: skip
    assert device["healthy"] is False and device["unhealthy_components"] == ["hbm"]
    assert device["host_memory"]["tensors"] == {"used_bytes": 4194304, "peak_bytes": 8388608}
    assert device["device_memory"]["model_code"] == {"used_bytes": 101125344, "peak_bytes": 101125344}
    assert device["neuroncores"]["0"]["device_memory"]["model_code"]["used_bytes"] == 101125344


def test_neuron_device_health_sysfs(tmp_path: Path) -> None:
    group = NeuronDeviceHealth(RootFS(lay_out_sysfs("neuron_device_health", SYSFS, tmp_path)), clock=lambda: 1000.0)
    group.prime()
    body = group.collect()
    device = body["neuron_devices"][0]
    assert device["health"]["state"] == "unhealthy"
    assert [(r["rule"], r["detail"]) for r in device["health"]["reasons"]] == [
        ("ecc_uncorrected", "sram"),
        ("unhealthy_component", "hbm"),
    ]
    # the product name says trn2.48xlarge (16 devices): the 15 the captured tree lacks are lost, not healthy
    assert body["node"]["expected_devices"] == 16 and body["node"]["device_states"]["unhealthy"] == 16
