"""A baseline exporter that ingests reports the way AWS's ``neuron-monitor-prometheus.py`` does.

Module-level client_python ``Gauge``/``Counter`` objects whose labelled children are set or incremented on every
report, and ``generate_latest`` at scrape time. Used in-process by ``bench_prometheus.py`` and, run as a script,
as a separate process reading report lines on stdin and serving them with client_python's own HTTP server (as
AWS's script does)::

    python3 bench/aws_style_exporter.py --port 8001 < reports.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Info


class AwsStyleBaseline:
    """Ingests reports as AWS's script does: module-level metric objects, ``labels(...).set/inc`` per report."""

    INSTANCE = ("instance_name", "instance_id", "instance_type", "availability_zone", "region", "subnet_id")

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.metrics: dict[str, Any] = {}
        self.instance_labels: dict[str, str] | None = None

    def _metric(self, cls: Any, name: str, doc: str, labels: list[str]) -> Any:
        m = self.metrics.get(name)
        if m is None:
            m = cls(name, doc, labels, registry=self.registry)
            self.metrics[name] = m
        return m

    def ingest(self, line: bytes) -> None:
        data = json.loads(line)
        info = data["instance_info"]
        if self.instance_labels is None:
            self.instance_labels = {
                "instance_name": info["instance_name"],
                "instance_id": info["instance_id"],
                "instance_type": info["instance_type"],
                "availability_zone": info["instance_availability_zone"],
                "region": info["instance_region"],
                "subnet_id": info["subnet_id"],
            }
            Info("instance", "EC2 instance information", registry=self.registry).info(self.instance_labels)
        inst = self.instance_labels
        for rt in data.get("neuron_runtime_data") or []:
            if rt["error"]:
                continue
            labels = {**inst, "runtime_tag": rt["neuron_runtime_tag"]}
            for group, body in rt["report"].items():
                if body["error"]:
                    continue
                getattr(self, f"_{group}", lambda b, lab: None)(body, labels)
        sysd = data.get("system_data") or {}
        if sysd.get("memory_info") and not sysd["memory_info"]["error"]:
            for key in ("memory_total_bytes", "memory_used_bytes", "swap_total_bytes", "swap_used_bytes"):
                prefix = "memory" if key.startswith("memory") else "swap"
                name = f"system_{prefix}_{key.split('_', 1)[1]}"
                self._metric(Gauge, name, name, list(inst)).labels(**inst).set(sysd["memory_info"][key])
        if sysd.get("neuron_hw_counters") and not sysd["neuron_hw_counters"]["error"]:
            ecc = self._metric(
                Counter,
                "hardware_ecc_events",
                "Hardware ecc events total",
                [*inst, "event_type", "neuron_device_index"],
            )
            for dev in sysd["neuron_hw_counters"]["neuron_devices"]:
                for event in ("mem_ecc_corrected", "mem_ecc_uncorrected", "sram_ecc_corrected", "sram_ecc_uncorrected"):
                    ecc.labels(**inst, event_type=event, neuron_device_index=dev["neuron_device_index"]).inc(dev[event])
        if sysd.get("vcpu_usage") and not sysd["vcpu_usage"]["error"]:
            avg = sysd["vcpu_usage"]["average_usage"]
            self._metric(Gauge, "system_vcpu_count", "System vCPU count", list(inst)).labels(**inst).set(
                len(sysd["vcpu_usage"]["usage_data"])
            )
            g = self._metric(Gauge, "system_vcpu_usage_ratio", "System CPU utilization ratio", [*inst, "usage_type"])
            g.labels(**inst, usage_type="user").set(min(avg["user"] + avg["nice"], 100) / 100)
            g.labels(**inst, usage_type="system").set(
                min(avg["system"] + avg["io_wait"] + avg["irq"] + avg["soft_irq"], 100) / 100
            )

    def _neuroncore_counters(self, body: dict[str, Any], labels: dict[str, str]) -> None:
        g = self._metric(Gauge, "neuroncore_utilization_ratio", "NeuronCore utilization ratio", [*labels, "neuroncore"])
        for idx, core in body["neuroncores_in_use"].items():
            g.labels(**labels, neuroncore=int(idx)).set(core["neuroncore_utilization"] / 100.0)

    def _execution_stats(self, body: dict[str, Any], labels: dict[str, str]) -> None:
        errors = self._metric(Counter, "execution_errors", "Execution errors total", [*labels, "error_type"])
        for k, v in body["error_summary"].items():
            errors.labels(**labels, error_type=k).inc(v)
        status = self._metric(Counter, "execution_status", "Execution status total", [*labels, "status_type"])
        for k, v in body["execution_summary"].items():
            status.labels(**labels, status_type=k).inc(v)
        total = body["latency_stats"]["total_latency"]
        if total is not None:
            lat = self._metric(
                Gauge, "execution_latency_seconds", "Execution latency in seconds", [*labels, "percentile"]
            )
            for p, v in total.items():
                lat.labels(**labels, percentile=p).set(v)

    def _memory_used(self, body: dict[str, Any], labels: dict[str, str]) -> None:
        used = body["neuron_runtime_used_bytes"]
        g = self._metric(
            Gauge, "neuron_runtime_memory_used_bytes", "Runtime memory used bytes", [*labels, "memory_location"]
        )
        g.labels(**labels, memory_location="host").set(used["host"])
        g.labels(**labels, memory_location="neuron_device").set(used["neuron_device"])
        for idx, cats in used["usage_breakdown"]["neuroncore_memory_usage"].items():
            for kind, value in cats.items():
                m = self._metric(
                    Gauge,
                    f"neuroncore_memory_usage_{kind}",
                    f"NeuronCore memory utilization for {kind}",
                    [*labels, "memory_location", "neuroncore"],
                )
                m.labels(**labels, memory_location=None, neuroncore=int(idx)).set(value)

    def _neuron_runtime_vcpu_usage(self, body: dict[str, Any], labels: dict[str, str]) -> None:
        g = self._metric(
            Gauge, "neuron_runtime_vcpu_usage_ratio", "Runtime vCPU utilization ratio", [*labels, "usage_type"]
        )
        for k in ("user", "system"):
            g.labels(**labels, usage_type=k).set(body["vcpu_usage"][k] / 100.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=8001)
    args = ap.parse_args()
    from prometheus_client import start_http_server

    baseline = AwsStyleBaseline()
    server, _ = start_http_server(args.port, addr="127.0.0.1", registry=baseline.registry)
    print(f"serving on port {server.server_address[1]}", file=sys.stderr, flush=True)
    for line in sys.stdin.buffer:
        if line.strip():
            baseline.ingest(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
