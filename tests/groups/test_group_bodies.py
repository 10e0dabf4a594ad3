"""One definition of a group's body (issue 38 item 3): a group's ``body.py`` holds its keys (constants) and their
types (a TypedDict); the collector builds that TypedDict and the spec reads through the constants. Checked here:
the constants are the TypedDict's keys, and the body a collector returns on real-format bytes has exactly them
(and reads back through the spec without a problem)."""

from __future__ import annotations

import errno
import shutil
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest

from neuron_monitor.groups.efa_counters import body as efa_body
from neuron_monitor.groups.efa_counters import spec as efa_spec
from neuron_monitor.groups.efa_counters.collector import EfaCounters
from neuron_monitor.groups.execution_stats import body as execution_stats_body
from neuron_monitor.groups.execution_stats import collector as execution_stats_collector
from neuron_monitor.groups.memory_info import body as memory_info_body
from neuron_monitor.groups.memory_info.collector import MemoryInfo
from neuron_monitor.groups.memory_used import body as memory_used_body
from neuron_monitor.groups.memory_used.collector import MemoryUsed
from neuron_monitor.groups.neuron_device_health import body as health_body
from neuron_monitor.groups.neuron_device_health import fault_events, rules
from neuron_monitor.groups.neuron_device_health.collector import NeuronDeviceHealth
from neuron_monitor.groups.neuron_device_telemetry import body as telemetry_body
from neuron_monitor.groups.neuron_device_telemetry.collector import NeuronDeviceTelemetry
from neuron_monitor.groups.neuron_hw_counters import body as hw_counters_body
from neuron_monitor.groups.neuron_hw_counters.collector import NeuronHwCounters
from neuron_monitor.groups.neuron_runtime_vcpu_usage import body as runtime_vcpu_body
from neuron_monitor.groups.neuron_runtime_vcpu_usage import collector as runtime_vcpu_collector
from neuron_monitor.groups.neuron_runtime_vcpu_usage.collector import usage_careful, usage_native
from neuron_monitor.groups.neuroncore_counters import body as neuroncore_counters_body
from neuron_monitor.groups.neuroncore_counters import collector as neuroncore_counters_collector
from neuron_monitor.groups.vcpu_usage import body as vcpu_usage_body
from neuron_monitor.groups.vcpu_usage import collector as vcpu_usage_collector
from neuron_monitor.groups.vcpu_usage.collector import VcpuUsage, usage_body_careful, usage_body_native
from neuron_monitor.host.procfs import parse_stat
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.nodes import ECC_BY_COUNTER
from neuron_monitor.neuron.plausible import ECC_SOURCES
from neuron_monitor.schema.spec import registry
from neuron_monitor.schema.values import Problems
from neuron_monitor.util.fdlimit import OutOfDescriptors
from tests.conftest import group_testdata, lay_out_sysfs
from tests.groups.efa_tree import add_adapter, add_neuron, port_files, set_counter, switch
from tests.groups.test_group_testdata import _collect as collect_data_block
from tests.neuron.appdata import TRN2, app_with, counters


def _reads_back(group: str, body: dict[str, Any]) -> None:
    spec = registry().get(group)
    assert spec is not None
    problems = Problems()
    spec.read(body, group, problems)
    assert not problems, (problems.counts, problems.values)


def _shaped(value: Any, hint: Any, where: str) -> None:
    """``value`` is what ``hint`` (a body.py type) says, all the way down: a TypedDict's dict has its keys in its
    order (a partial one: a subset, in order, with every required key); ``dict[str, T]``/``list[T]`` members are
    each a T; a leaf is an instance of its class (an int passes for a float, JSON's way)."""
    if is_typeddict(hint):
        assert isinstance(value, dict), where
        keys = list(get_type_hints(hint))
        assert list(value) == [k for k in keys if k in value], (where, list(value), keys)
        assert hint.__required_keys__ <= value.keys(), (where, hint.__required_keys__ - value.keys())
        for key, member in get_type_hints(hint).items():
            if key in value:
                _shaped(value[key], member, f"{where}.{key}")
        return
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        assert any(_fits(value, a) for a in args), (where, value, hint)
        for a in args:
            if _fits(value, a):
                return _shaped(value, a, where)
    if origin is dict:
        assert isinstance(value, dict), where
        for k, v in value.items():
            assert isinstance(k, args[0]), (where, k)
            _shaped(v, args[1], f"{where}.{k}")
    elif origin is list:
        assert isinstance(value, list), where
        for i, v in enumerate(value):
            _shaped(v, args[0], f"{where}[{i}]")
    elif hint is not Any:
        assert _fits(value, hint), (where, value, hint)


def _fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the outer type of ``hint`` (a class, a TypedDict, dict[..], list[..], None)."""
    if hint is None or hint is type(None):
        return value is None
    if is_typeddict(hint) or get_origin(hint) is dict:
        return isinstance(value, dict)
    if get_origin(hint) is list:
        return isinstance(value, list)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return hint is Any or isinstance(value, hint)


def test_memory_info_keys_are_defined_once(tmp_path: Path) -> None:
    keys = list(get_type_hints(memory_info_body.MemoryInfoBody))
    assert list(memory_info_body.FIELDS) == keys
    (tmp_path / "proc").mkdir()
    shutil.copy(group_testdata("memory_info", "meminfo_trn2"), tmp_path / "proc" / "meminfo")
    group = MemoryInfo(RootFS(tmp_path))
    body = group.collect()
    group.close()
    assert list(body) == keys
    assert all(isinstance(body[k], int) for k in keys)
    _shaped(body, memory_info_body.MemoryInfoBody, "memory_info")
    _reads_back("memory_info", body)


def _bumped(stat: bytes) -> bytes:
    """``stat`` a moment later: every cpu line's user and idle columns grown, ctxt grown."""
    out = []
    for line in stat.decode().splitlines():
        parts = line.split()
        if parts and parts[0].startswith("cpu"):
            parts[1], parts[4] = str(int(parts[1]) + 7), str(int(parts[4]) + 93)
            line = " ".join(parts)
        elif parts and parts[0] == "ctxt":
            line = f"ctxt {int(parts[1]) + 500}"
        out.append(line)
    return ("\n".join(out) + "\n").encode()


def test_vcpu_usage_keys_are_defined_once_and_the_compiled_twin_uses_them(tmp_path: Path) -> None:
    keys = list(get_type_hints(vcpu_usage_body.VcpuUsageBody))
    assert list(vcpu_usage_body.FIELDS) == keys
    first = group_testdata("vcpu_usage", "stat_192cpu").read_bytes()
    (tmp_path / "proc").mkdir()
    stat = tmp_path / "proc" / "stat"
    stat.write_bytes(first)
    group = VcpuUsage(RootFS(tmp_path))
    group.prime()
    stat.write_bytes(_bumped(first))
    body = group.collect()
    group.close()
    assert list(body) == keys
    assert list(body[vcpu_usage_body.AVERAGE_USAGE]) == list(vcpu_usage_body.CPU_MODES)
    assert all(list(s) == list(vcpu_usage_body.CPU_MODES) for s in body[vcpu_usage_body.USAGE_DATA].values())
    _shaped(body, vcpu_usage_body.VcpuUsageBody, "vcpu_usage")
    _reads_back("vcpu_usage", body)
    careful = usage_body_careful(parse_stat(first), parse_stat(_bumped(first)))
    assert careful == body
    if vcpu_usage_collector.NATIVE is not None:  # the compiled helper writes its own keys: body.py's
        native = usage_body_native(first, _bumped(first))
        assert native is not None and list(native) == keys and native == careful


PID_STAT = (  # /proc/PID/stat as the kernel writes it (a comm with spaces and parentheses): utime 1234, stime 567
    b"4242 (python3 (worker) x) S 1 4242 4242 0 -1 4194560 500 0 0 0 1234 567 0 0 20 0 9 0 100000 1 1 "
    b"18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
)


def test_neuron_runtime_vcpu_usage_keys_are_defined_once_and_the_compiled_twin_uses_them() -> None:
    body_module = runtime_vcpu_body
    required = list(runtime_vcpu_body._Usage.__annotations__)
    assert set(get_type_hints(body_module.RuntimeVcpuUsageBody)) == {
        body_module.VCPU_USAGE,
        body_module.PERIOD,
        body_module.ERROR,
    }
    assert required == [body_module.VCPU_USAGE]
    assert list(get_type_hints(body_module.CpuShares)) == list(body_module.MODES)
    careful, utime, stime = usage_careful(PID_STAT, 1000, 500, 2.0)
    assert (utime, stime) == (1234, 567)
    assert list(careful) == [body_module.PERIOD, body_module.VCPU_USAGE]
    assert list(careful[body_module.VCPU_USAGE]) == list(body_module.MODES)
    _reads_back("neuron_runtime_vcpu_usage", dict(careful))
    if runtime_vcpu_collector.NATIVE is not None:  # the compiled helper writes its own keys: body.py's
        native = usage_native(PID_STAT, 1000, 500, 2.0)
        assert native is not None and native == (careful, utime, stime)
        assert list(native[0]) == list(careful) and list(native[0][body_module.VCPU_USAGE]) == list(body_module.MODES)


def test_execution_stats_keys_are_defined_once() -> None:
    b = execution_stats_body
    assert list(get_type_hints(b._Summary)) == [b.ERROR_SUMMARY, b.EXECUTION_SUMMARY, b.LATENCY_STATS]
    assert set(get_type_hints(b.ExecutionStatsBody)) == {
        b.ERROR_SUMMARY,
        b.EXECUTION_SUMMARY,
        b.LATENCY_STATS,
        b.PERIOD,
    }
    assert list(get_type_hints(b.LatencyStats)) == list(b.LATENCY_KINDS) == [b.TOTAL_LATENCY, b.DEVICE_LATENCY]
    # the data block's counter map sits below the groups (neuron/layout.py): it must name body.py's keys
    assert [name for name, _ in L.EXECUTION_SUMMARY] == list(b.STATUS_TYPES)
    assert [name for name, _ in L.ERROR_SUMMARY] == list(b.ERROR_TYPES)
    assert sorted(name for name, _ in execution_stats_collector.PERCENTILES) == sorted(b.PERCENTILES)
    group = execution_stats_collector.ExecutionStats(RootFS("/"))
    first = app_with({0: counters({1: 10}), 1: counters({1: 5})}, t=0.0)
    group.collect([first], [])
    later = app_with({0: counters({1: 25, 3: 3, 13: 1500, 14: 1700}), 1: counters({1: 9, 13: 900, 14: 1000})},
                     t=2.0, like=first)  # fmt: skip
    body = group.collect([later], [])[later.pid]  # the compiled twin's body in [compiled] (every core completed)
    assert list(body) == [b.ERROR_SUMMARY, b.EXECUTION_SUMMARY, b.LATENCY_STATS, b.PERIOD]
    assert list(body[b.ERROR_SUMMARY]) == list(b.ERROR_TYPES)
    assert list(body[b.EXECUTION_SUMMARY]) == list(b.STATUS_TYPES)
    assert list(body[b.LATENCY_STATS]) == list(b.LATENCY_KINDS)
    assert sorted(body[b.LATENCY_STATS][b.TOTAL_LATENCY]) == sorted(b.PERCENTILES)
    _shaped(body, b.ExecutionStatsBody, "execution_stats")
    _reads_back("execution_stats", body)


def test_neuroncore_counters_keys_are_defined_once() -> None:
    b = neuroncore_counters_body
    assert set(get_type_hints(b.NeuroncoreCountersBody)) == {b.NEURONCORES_IN_USE, b.PERIOD}
    assert list(get_type_hints(b.CoreEntry)) == [b.NEURONCORE_UTILIZATION, b.FLOPS, b.EFFECTIVE_FLOPS]
    mem = {22: 4096}  # some device memory on each core: the app uses it
    group = neuroncore_counters_collector.NeuroncoreCounters(RootFS("/"))
    first = app_with({c: counters({**mem}) for c in range(8)}, t=0.0, topology=TRN2)
    group.collect([first], [])
    later = app_with({c: counters({0: 50_000 + c, 29: 10**6 + c, **mem}) for c in range(8)}, t=0.1, like=first)
    body = group.collect([later], [])[later.pid]  # the compiled twin's body in [compiled] (the usual trn2 case)
    assert list(body) == [b.NEURONCORES_IN_USE, b.PERIOD]
    for entry in body[b.NEURONCORES_IN_USE].values():
        known = [k for k in entry if k in get_type_hints(b.CoreEntry)]
        breakdown = [k for k in entry if k not in known]
        assert known == [b.NEURONCORE_UTILIZATION, b.FLOPS]
        assert len(breakdown) == 1 and b.PHYSICAL_BREAKDOWN_KEY.fullmatch(breakdown[0])
        assert all(list(v) == [b.NEURONCORE_UTILIZATION] for v in entry[breakdown[0]].values())
    _shaped(body, b.NeuroncoreCountersBody, "neuroncore_counters")
    _reads_back("neuroncore_counters", body)


def test_memory_used_keys_are_defined_once() -> None:
    b = memory_used_body

    def keys(td: Any) -> list[str]:
        return list(get_type_hints(td))

    assert keys(b.MemoryUsedBody) == list(b.FIELDS)
    assert keys(b.RuntimeUsedBytes) == keys(b.SubgraphUsedBytes) == list(b.USED_FIELDS)
    assert keys(b.RuntimeBreakdown) == [b.LOCATION_HOST, b.NEURONCORE_MEMORY_USAGE]
    assert keys(b.SubgraphBreakdown) == list(b.MEMORY_LOCATIONS)
    assert keys(b.HostMemory) == list(b.HOST_MEMORY_CATEGORIES)
    assert keys(b.CoreMemory) == list(b.MEMORY_CATEGORIES)
    assert keys(b.SubgraphDeviceMemory) == list(b.SUBGRAPH_DEVICE_CATEGORIES)
    assert keys(b.LoadedModel) == list(b.MODEL_FIELDS)
    assert keys(b.Subgraph) == list(b.SUBGRAPH_FIELDS)
    # the data block's memory counter maps sit below the groups (neuron/layout.py): they must name body.py's keys
    assert [name for name, _ in L.HOST_MEM_COUNTERS] == list(b.HOST_MEMORY_CATEGORIES)
    assert [name for name, _ in L.DEVICE_MEM_COUNTERS] == list(b.MEMORY_CATEGORIES)
    # a body collected from two real-format reads of a runtime's data block (one model loaded, one core in use)
    body = collect_data_block("memory_used", MemoryUsed(RootFS("/")))
    _shaped(body, b.MemoryUsedBody, "memory_used")
    used = body[b.NEURON_RUNTIME_USED_BYTES]
    assert list(used[b.USAGE_BREAKDOWN][b.NEURONCORE_MEMORY_USAGE]) == ["0"]
    (model,) = body[b.LOADED_MODELS]
    assert list(model[b.MODEL_SUBGRAPHS]) == ["sg_00"]
    _reads_back("memory_used", body)


def test_neuron_hw_counters_keys_are_defined_once(tmp_path: Path) -> None:
    b = hw_counters_body
    assert set(get_type_hints(b.NeuronHwCountersBody)) == {b.NEURON_DEVICES, b.ERROR}
    assert list(get_type_hints(b.DeviceEcc)) == [b.NEURON_DEVICE_INDEX, *b.COUNTERS]
    assert b.DeviceEcc.__required_keys__ == {b.NEURON_DEVICE_INDEX}
    assert all(counter in ECC_BY_COUNTER for counter in b.COUNTERS)  # the driver's file of each (neuron/nodes.py)
    assert all(counter in ECC_SOURCES for counter in b.COUNTERS)  # and what it can count (neuron/plausible.py)
    # one device's ECC files as the driver writes them (real format), an event between two reads
    hardware = "sys/devices/virtual/neuron_device/neuron0/stats/hardware"
    root = lay_out_sysfs("neuron_hw_counters", "sysfs_trn2_neuron0.txt", tmp_path / "full")
    group = NeuronHwCounters(RootFS(root))
    group.prime()
    (root / hardware / "mem_ecc_corrected").write_text("5\n")
    counted = group.collect()  # the careful path's body
    quiet = group.collect()  # the same bytes again: the one-pass read's all-zero body
    group.close()
    root = lay_out_sysfs("neuron_hw_counters", "sysfs_trn2_neuron0.txt", tmp_path / "partial")
    (root / hardware / "sram_ecc_corrected").unlink()  # a counter this driver does not expose
    group = NeuronHwCounters(RootFS(root))
    group.prime()
    partial = group.collect()
    group.close()
    for body in (counted, quiet, partial):
        _shaped(body, b.NeuronHwCountersBody, "neuron_hw_counters")
        _reads_back("neuron_hw_counters", body)
    full = [b.NEURON_DEVICE_INDEX, *b.COUNTERS]
    assert list(counted) == list(quiet) == [b.NEURON_DEVICES]
    assert list(counted[b.NEURON_DEVICES][0]) == list(quiet[b.NEURON_DEVICES][0]) == full
    assert counted[b.NEURON_DEVICES][0][b.MEM_ECC_CORRECTED] == 2
    assert list(partial) == [b.NEURON_DEVICES, b.ERROR] and b.SRAM_ECC_CORRECTED in partial[b.ERROR]
    assert list(partial[b.NEURON_DEVICES][0]) == [k for k in full if k != b.SRAM_ECC_CORRECTED]


def test_neuron_device_telemetry_keys_are_defined_once(tmp_path: Path) -> None:
    b = telemetry_body
    assert set(get_type_hints(b.NeuronDeviceTelemetryBody)) == {b.NEURON_DEVICES, b.ERROR}
    assert list(get_type_hints(b.DeviceTelemetry)) == list(b.DEVICE_FIELDS)
    assert b.DeviceTelemetry.__required_keys__ == {b.DEVICE_INDEX}
    assert list(get_type_hints(b.Power)) == list(b.POWER_FIELDS)
    assert b.Power.__required_keys__ == {b.STATUS, b.SAMPLE_TIME}
    assert list(get_type_hints(b.MemoryAmount)) == [b.USED, b.PEAK]
    assert list(get_type_hints(b.Ecc)) == [b.REPAIRABLE_ECC]
    assert list(get_type_hints(b.CoreTelemetry)) == list(b.CORE_FIELDS)
    # one trn2 device's files as the driver writes them (real format): everything the group reads, then the same
    # tree without its power file and logical core 0's tensors peak
    device = "sys/devices/virtual/neuron_device/neuron0"
    bodies = []
    for name in ("full", "partial"):
        root = lay_out_sysfs("neuron_device_telemetry", "sysfs_trn2_neuron0.txt", tmp_path / name)
        if name == "partial":
            (root / device / "stats/power/utilization").unlink()
            for core in (0, 1):  # the physical cores of logical core 0 (LNC=2)
                (root / device / f"neuron_core{core}/stats/memory_usage/device_mem/tensors/peak").unlink()
        group = NeuronDeviceTelemetry(RootFS(root))
        group.prime()
        bodies.append(group.collect())
        group.close()
    full, partial = bodies
    for body in bodies:
        _shaped(body, b.NeuronDeviceTelemetryBody, "neuron_device_telemetry")
        _reads_back("neuron_device_telemetry", body)
    assert list(full) == [b.NEURON_DEVICES]
    (entry,) = full[b.NEURON_DEVICES]
    assert list(entry) == list(b.DEVICE_FIELDS) and list(entry[b.POWER]) == list(b.POWER_FIELDS)
    assert all(list(core) == list(b.CORE_FIELDS) for core in entry[b.NEURONCORES].values())
    assert list(partial) == [b.NEURON_DEVICES, b.ERROR]
    (entry,) = partial[b.NEURON_DEVICES]
    assert list(entry) == [k for k in b.DEVICE_FIELDS if k != b.POWER]
    assert list(entry[b.NEURONCORES]["0"][b.DEVICE_MEMORY]["tensors"]) == [b.USED]


def test_neuron_device_health_keys_are_defined_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = health_body
    assert list(get_type_hints(b.NeuronDeviceHealthBody)) == list(b.FIELDS)
    assert b.NeuronDeviceHealthBody.__required_keys__ == set(b.FIELDS) - {b.ERROR}
    assert list(get_type_hints(b.DeviceHealth)) == list(b.DEVICE_FIELDS)
    assert list(get_type_hints(b.Health)) == list(b.HEALTH_FIELDS)
    assert list(get_type_hints(b.Reason)) == list(b.REASON_FIELDS)
    assert list(get_type_hints(b.FaultEvent)) == [b.COUNT, b.FIRST_SEEN]
    assert list(get_type_hints(b.FaultTotal)) == [b.COUNT, b.FIRST_SEEN, b.LAST_SEEN]
    assert list(get_type_hints(b.Node)) == list(b.NODE_FIELDS)
    # the states and fault kinds the rules and the fault ledger use (device_states' and fault_events' keys)
    assert b.STATES == rules.STATES and b.FAULT_KINDS == fault_events.KINDS
    # one trn2 device's files as the driver writes them (real format: an uncorrected SRAM ECC count and an
    # unhealthy HBM); the instance type says 16 devices, so 15 are lost
    root = lay_out_sysfs("neuron_device_health", "sysfs_trn2_neuron0.txt", tmp_path)
    clock = iter(float(t) for t in range(1000, 2000))
    group = NeuronDeviceHealth(RootFS(root), clock=lambda: next(clock))
    group.prime()
    sram = root / "sys/devices/virtual/neuron_device/neuron0/stats/hardware/sram_ecc_uncorrected"
    sram.write_text(str(int(sram.read_text()) + 2) + "\n")  # two new uncorrected errors: a fault event
    counted = group.collect()
    monkeypatch.setattr(group, "_poll", lambda: (_ for _ in ()).throw(OutOfDescriptors(OSError(errno.EMFILE, ""))))
    unknown = group.collect()  # no descriptor left: every verdict unknown, totals kept, the group's error says why
    group.close()
    for body in (counted, unknown):
        _shaped(body, b.NeuronDeviceHealthBody, "neuron_device_health")
        _reads_back("neuron_device_health", body)
    assert list(counted) == [b.NODE, b.NEURON_DEVICES, b.WATCH_INTERVAL]
    assert list(counted[b.NODE][b.DEVICE_STATES]) == list(b.STATES)
    device = counted[b.NEURON_DEVICES][0]
    assert list(device) == list(b.DEVICE_FIELDS) and device[b.HEALTH][b.STATE] == "unhealthy"
    assert all(list(r) == list(b.REASON_FIELDS) for r in device[b.HEALTH][b.REASONS]) and device[b.HEALTH][b.REASONS]
    assert device[b.FAULT_EVENTS]["ecc_uncorrected"][b.COUNT] == 2
    assert list(device[b.FAULT_TOTALS]["ecc_uncorrected"]) == [b.COUNT, b.FIRST_SEEN, b.LAST_SEEN]
    assert list(unknown) == list(b.FIELDS) and unknown[b.NODE][b.STATE] == "unknown"
    assert unknown[b.NEURON_DEVICES][0][b.FAULT_TOTALS] == device[b.FAULT_TOTALS]


def test_efa_counters_keys_are_defined_once(tmp_path: Path) -> None:
    b = efa_body
    assert set(get_type_hints(b.EfaCountersBody)) == {b.EFA_PORTS, b.ERROR}
    assert b.EfaCountersBody.__required_keys__ == {b.EFA_PORTS}
    assert list(get_type_hints(b.PortEntry)) == list(b.PORT_FIELDS)
    # the spec names a family and a metric for exactly the known counters, in their order
    assert [info[0] for info in efa_spec.PORT_COUNTER_INFO] == list(b.PORT_COUNTERS)
    # a port's files as the kernel prints them (real format), on Linux 6.17 and before the network counters; a
    # counter step between two reads; then the newer adapter gone (reported ABSENT)
    port = add_adapter(tmp_path, "rdmap16s27", switch(0, 0))
    add_adapter(tmp_path, "rdmap24s27", switch(1, 0), port_files("port_files_no_network.txt"))
    add_neuron(tmp_path, 0, switch(0, 1))
    root = RootFS(tmp_path)
    group = EfaCounters(root)
    group.prime()
    set_counter(port, b.TX_BYTES, int((port / "hw_counters" / b.TX_BYTES).read_text()) + 5000)
    counted = group.collect()
    (tmp_path / "sys/class/infiniband/rdmap16s27").unlink()
    shutil.rmtree(port.parent.parent)
    root.forget_listing("sys/class/infiniband")
    gone = group.collect()
    group.close()
    for body in (counted, gone):
        _shaped(body, b.EfaCountersBody, "efa_counters")
        _reads_back("efa_counters", body)
    assert list(counted) == [b.EFA_PORTS, b.ERROR]  # the older kernel's missing counters are named
    new, old = sorted(counted[b.EFA_PORTS], key=lambda p: p[b.EFA_DEVICE])
    assert list(new) == list(b.PORT_FIELDS) and sorted(new[b.COUNTERS]) == sorted(b.PORT_COUNTERS)
    assert new[b.COUNTERS][b.TX_BYTES] == 5000 and new[b.NEURON_DEVICE_INDEXES] == [0]
    assert set(old[b.COUNTERS]) < set(b.PORT_COUNTERS) and b.RETRANS_PKTS not in old[b.COUNTERS]
    absent = next(p for p in gone[b.EFA_PORTS] if p[b.EFA_DEVICE] == "rdmap16s27")
    assert list(absent) == list(b.PORT_FIELDS) and absent[b.STATE] == "ABSENT" and absent[b.COUNTERS] == {}
