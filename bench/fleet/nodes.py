"""The fleet's nodes: who they are, what they replay, and what goes wrong on them.

Each node replays the recorded reports of its shape (``recording``) in a loop with its own identity (instance id,
name, availability zone), the current ``report_time``, and the daemon object of a daemon that started with the
node. On top of that a node may:

- have a runtime that stops and starts again (``Churn``): absent from the reports for a while, then back with a
  new pid (its counters start over, as with a real restart);
- carry one injected fault (``Fault``), applied to the report as the daemon would write it:
  ``unhealthy_device`` (the driver reports a device component unhealthy), ``ecc_uncorrected`` (uncorrected HBM
  errors counted once), ``hardware_errors`` (a runtime's executions fail with hardware errors, once), ``hung_runtime``
  (a runtime keeps its models loaded and stops executing: 0 % on its cores), ``host_memory_pressure`` (95 % of the
  host's memory in use), ``exporter_down`` (the node's exporter stops answering; handled by ``exporters``).

``expected_alerts`` says which alerts each fault must raise, with the labels that name the node and the part.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from bench.fleet.recording import ShapeRun

FAULT_KINDS = (
    "unhealthy_device",
    "ecc_uncorrected",
    "hardware_errors",
    "hung_runtime",
    "host_memory_pressure",
    "exporter_down",
)


@dataclass(frozen=True)
class Fault:
    kind: str
    at: float = 0.0  # seconds after the faults were switched on (``FleetExporters.activate_faults``)
    device: int = 0
    runtime: int = 0  # index of the runtime entry (job-NN)


@dataclass(frozen=True)
class Churn:
    """Runtime ``runtime`` is gone from ``stop`` until ``start`` seconds after the fleet started, then back."""

    runtime: int
    stop: float
    start: float


@dataclass
class Node:
    index: int
    run: ShapeRun
    node_group: str
    zone: str
    fault: Fault | None = None
    churn: Churn | None = None
    lines: list[bytes] = field(default_factory=list)  # this node's recorded lines, with its identity
    started: float = 0.0
    reports: int = 0
    fault_applied: bool = False
    fault_since: float = 0.0  # report_time of the first report with the fault

    @property
    def name(self) -> str:
        return f"fleet-{self.index:03d}"

    @property
    def instance_id(self) -> str:
        return f"i-0f1ee7{self.index:011x}"  # 17 hex digits, as EC2's; 0f1ee7 marks the harness's

    def bind(self, recorded: list[bytes]) -> None:
        """Take the shape's recorded lines (the daemon ran without instance metadata: this node gives its own)."""
        self.lines = recorded

    def fault_due(self, now: float, faults_since: float | None) -> bool:
        return self.fault is not None and faults_since is not None and now >= faults_since + self.fault.at

    def report(self, now: float, fleet_start: float, faults_since: float | None) -> dict[str, Any]:
        """The node's next report at wall time ``now`` (a fresh object each time); its fault applies from
        ``faults_since + fault.at`` on."""
        line = self.lines[(self.reports + self.index) % len(self.lines)]
        self.reports += 1
        report: dict[str, Any] = orjson.loads(line)
        report["report_time"] = now
        info = report.get("instance_info") or {}
        info.update(
            instance_id=self.instance_id,
            instance_type=self.run.shape,
            instance_name=self.name,
            instance_availability_zone=self.zone,
            instance_availability_zone_id=self.zone.replace("us-west-2", "usw2-az"),
            instance_region="us-west-2",
            subnet_id=f"subnet-0f1ee7{self.index % 4:011x}",
            error="",
        )
        report["instance_info"] = info
        monitor = report.get("neuron_monitor")
        if isinstance(monitor, dict):  # a healthy daemon that started with the node
            monitor.update(start_time=self.started, reports=self.reports, skipped_collections=0, late_collections=0)
        elapsed = now - fleet_start
        if self.churn is not None and self.churn.stop <= elapsed < self.churn.start:
            self._drop_runtime(report, self.churn.runtime)
        elif self.churn is not None and elapsed >= self.churn.start:
            self._new_pid(report, self.churn.runtime)
        if self.fault is not None and self.fault_due(now, faults_since):
            self._apply(report, self.fault, first=not self.fault_applied)
            self.fault_applied = True
        return report

    # -- edits ---------------------------------------------------------------------------------------------
    @staticmethod
    def _runtime(report: dict[str, Any], index: int) -> dict[str, Any] | None:
        runtimes = report.get("neuron_runtime_data") or []
        return runtimes[index] if index < len(runtimes) else None

    def _drop_runtime(self, report: dict[str, Any], index: int) -> None:
        runtimes = report.get("neuron_runtime_data") or []
        if index < len(runtimes):
            del runtimes[index]

    def _new_pid(self, report: dict[str, Any], index: int) -> None:
        entry = self._runtime(report, index)
        if entry is not None:
            entry["pid"] = int(entry.get("pid", 0)) + 100_000

    def _apply(self, report: dict[str, Any], fault: Fault, first: bool) -> None:
        if first:
            self.fault_since = float(report["report_time"])
        since = self.fault_since
        system = report.get("system_data") or {}
        if fault.kind == "unhealthy_device":
            for dev in (system.get("neuron_device_telemetry") or {}).get("neuron_devices") or []:
                if dev.get("neuron_device_index") == fault.device:
                    dev["healthy"] = False
                    dev["unhealthy_components"] = ["hbm"]
            mark_unhealthy(
                system,
                fault.device,
                "unhealthy_component",
                "health_component",
                "driver reports hbm unhealthy",
                1,
                since,
                first,
            )
        elif fault.kind == "ecc_uncorrected":
            if first:
                for dev in (system.get("neuron_hw_counters") or {}).get("neuron_devices") or []:
                    if dev.get("neuron_device_index") == fault.device:
                        dev["mem_ecc_uncorrected"] = 2
            mark_unhealthy(
                system,
                fault.device,
                "ecc_uncorrected",
                "ecc_uncorrected",
                "2 uncorrected HBM ECC errors",
                2,
                since,
                first,
            )
        elif fault.kind == "hardware_errors" and first:
            entry = self._runtime(report, fault.runtime)
            stats = (entry or {}).get("report", {}).get("execution_stats")
            if stats:
                stats["error_summary"]["hardware"] = 3
                stats["execution_summary"]["completed_with_err"] = 3
        elif fault.kind == "hung_runtime":
            entry = self._runtime(report, fault.runtime)
            groups = (entry or {}).get("report", {})
            cores = (groups.get("neuroncore_counters") or {}).get("neuroncores_in_use") or {}
            for core in cores.values():
                _zero(core)  # utilization, FLOPs, and the physical cores' breakdown
            stats = groups.get("execution_stats")
            if stats:
                stats["execution_summary"] = dict.fromkeys(stats["execution_summary"], 0)
                stats["error_summary"] = dict.fromkeys(stats["error_summary"], 0)
        elif fault.kind == "host_memory_pressure":
            memory = system.get("memory_info")
            if memory:
                memory["memory_used_bytes"] = int(memory["memory_total_bytes"] * 0.95)


def expected_alerts(node: Node, target: str) -> set[tuple[str, str, str]]:
    """The alerts ``node``'s fault must raise: (alertname, instance, the part: device, runtime or core)."""
    fault = node.fault
    if fault is None:
        return set()
    tag = f"job-{fault.runtime:02d}"
    if fault.kind == "unhealthy_device":
        return {("NeuronDeviceUnhealthy", target, str(fault.device))}
    if fault.kind == "ecc_uncorrected":  # the health verdict turns unhealthy on uncorrected ECC (docs/health.md)
        return {
            ("NeuronDeviceUncorrectedEcc", target, str(fault.device)),
            ("NeuronDeviceUnhealthy", target, str(fault.device)),
        }
    if fault.kind == "hardware_errors":
        return {("NeuronExecutionHardwareErrors", target, tag)}
    if fault.kind == "hung_runtime":
        cores = hung_cores(node)
        return {("NeuronCoreIdleWithModelsLoaded", target, f"{tag}/{c}") for c in cores}
    if fault.kind == "host_memory_pressure":
        return {("NeuronHostMemoryPressure", target, "")}
    if fault.kind == "exporter_down":
        return {("NeuronExporterDown", target, "")}
    raise ValueError(f"unknown fault {fault.kind}")


def hung_cores(node: Node) -> list[str]:
    """The cores of the hung runtime, from the node's recording."""
    assert node.fault is not None
    report = orjson.loads(node.lines[0])
    entry = Node._runtime(report, node.fault.runtime) or {}
    cores = (entry.get("report", {}).get("neuroncore_counters") or {}).get("neuroncores_in_use") or {}
    return sorted(cores, key=int)


def alert_key(labels: dict[str, str]) -> tuple[str, str, str]:
    """An alert's (alertname, instance, part) as ``expected_alerts`` names them."""
    name = labels["alertname"]
    part = ""
    if name.startswith("NeuronDevice"):
        part = labels.get("neuron_device_index", "")
    elif name == "NeuronCoreIdleWithModelsLoaded":
        part = f"{labels.get('runtime_tag', '')}/{labels.get('neuroncore', '')}"
    elif name.startswith("NeuronExecution"):
        part = labels.get("runtime_tag", "")
    elif name == "NeuronMonitorGroupFailing":
        part = labels.get("group", "")
    return name, labels.get("instance", ""), part


def _zero(obj: dict[str, Any]) -> None:
    """Every number in ``obj`` (nested objects too) set to 0."""
    for key, value in obj.items():
        if isinstance(value, dict):
            _zero(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            obj[key] = 0


def mark_unhealthy(
    system: dict[str, Any], device: int, rule: str, kind: str, message: str, count: int, since: float, first: bool
) -> None:
    """The daemon's health verdict for a device it finds unhealthy by ``rule`` since ``since`` (as the
    neuron_device_health group writes it, docs/health.md): the device's state, reason and fault totals, the fault
    event in the first report, the node's state and device counts."""
    health = system.get("neuron_device_health")
    if not isinstance(health, dict):
        return  # a daemon without the health group
    devices = health.get("neuron_devices") or []
    for dev in devices:
        if dev.get("neuron_device_index") == device:
            dev["health"] = {
                "state": "unhealthy",
                "since": since,
                "reasons": [
                    {"rule": rule, "severity": "unhealthy", "detail": "hbm", "message": message, "since": since}
                ],
            }
            dev["fault_totals"] = {kind: {"count": count, "first_seen": since, "last_seen": since}}
            dev["fault_events"] = {kind: {"count": count, "first_seen": since}} if first else {}
    node = health.get("node")
    if isinstance(node, dict):
        states = [(dev.get("health") or {}).get("state", "unknown") for dev in devices]
        node["device_states"] = {state: states.count(state) for state in ("healthy", "unhealthy", "unknown")}
        node["state"], node["since"] = "unhealthy", since
