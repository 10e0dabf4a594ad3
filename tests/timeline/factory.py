"""Builders of neuron-monitor reports (AWS's shape plus report_time and fresh) for the timeline tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from neuron_monitor.timeline.recording import Recorder

T0 = 1_767_268_800.0  # 2026-01-01 12:00:00 UTC
CATS = ("constants", "model_code", "model_shared_scratchpad", "runtime_memory", "tensors")


@dataclass
class Rt:
    """One runtime in one report."""

    pid: int
    tag: str
    cores: list[int]  # global NeuronCore indices
    util: float = 50.0
    flops: float = 1e12
    completed: int = 100
    errors: dict[str, int] = field(default_factory=dict)  # error_summary keys
    outcomes: dict[str, int] = field(default_factory=dict)  # execution_summary keys besides completed
    fresh: bool = True
    models: int = 1
    tensors: int = 1 << 20
    p50: float | None = 0.002
    p99: float | None = 0.004


def runtime_entry(rt: Rt, per_device: int, period: float) -> dict[str, Any]:
    es = dict.fromkeys(("generic", "numerical", "transient", "model", "runtime", "hardware"), 0) | rt.errors
    xs = {"completed": rt.completed} | dict.fromkeys(
        ("completed_with_err", "completed_with_num_err", "timed_out", "incorrect_input", "failed_to_queue"), 0
    )
    xs |= rt.outcomes
    latency = (
        {"p0": rt.p50, "p1": rt.p50, "p25": rt.p50, "p50": rt.p50, "p75": rt.p99, "p99": rt.p99, "p100": rt.p99}
        if rt.p50 is not None
        else None
    )
    core_mem = {str(c): {"constants": 1000, "model_code": 2000, "model_shared_scratchpad": 0, "runtime_memory": 0,
                         "tensors": rt.tensors} for c in rt.cores}  # fmt: skip
    models = [
        {
            "name": f"model{m}",
            "uuid": f"{m:032x}",
            "model_id": 10001 + m,
            "is_running": True,
            "subgraphs": {
                f"sg_{i:02d}": {
                    "memory_used_bytes": {"host": 1, "neuron_device": 1, "usage_breakdown": {}},
                    "neuroncore_index": c % per_device,
                    "neuron_device_index": c // per_device,
                }
                for i, c in enumerate(rt.cores)
            },
        }
        for m in range(rt.models)
    ]
    return {
        "pid": rt.pid,
        "neuron_runtime_tag": rt.tag,
        "error": "",
        "report": {
            "execution_stats": {
                "period": period,
                "error_summary": es,
                "execution_summary": xs,
                "latency_stats": {"total_latency": latency, "device_latency": latency},
                "error": "",
                "fresh": rt.fresh,
            },
            "memory_used": {
                "period": period,
                "neuron_runtime_used_bytes": {
                    "host": 5000,
                    "neuron_device": 3000 * len(rt.cores),
                    "usage_breakdown": {
                        "host": {"application_memory": 5000, "constants": 0, "dma_buffers": 0, "tensors": 0},
                        "neuroncore_memory_usage": core_mem,
                    },
                },
                "loaded_models": models,
                "error": "",
                "fresh": rt.fresh,
            },
            "neuron_runtime_vcpu_usage": {
                "period": period,
                "vcpu_usage": {"user": 10.0, "system": 2.0},
                "error": "",
                "fresh": rt.fresh,
            },
            "neuroncore_counters": {
                "period": period,
                "neuroncores_in_use": {
                    str(c): {"neuroncore_utilization": rt.util, "flops": rt.flops} for c in rt.cores
                },
                "error": "",
                "fresh": rt.fresh,
            },
        },
    }


def report(
    t: float,
    runtimes: list[Rt],
    instance: str = "i-0123456789abcdef0",
    devices: int = 4,
    per_device: int = 2,
    period: float = 1.0,
    ecc: dict[int, tuple[int, int]] | None = None,  # device -> (mem, sram) uncorrected
    system_fresh: bool = True,
) -> dict[str, Any]:
    ecc = ecc or {}
    cpu = {"user": 20.0, "nice": 0.0, "system": 5.0, "idle": 75.0, "io_wait": 0.0, "irq": 0.0, "soft_irq": 0.0}
    return {
        "neuron_runtime_data": [runtime_entry(rt, per_device, period) for rt in runtimes],
        "system_data": {
            "memory_info": {
                "period": period,
                "memory_total_bytes": 64 << 30,
                "memory_used_bytes": 8 << 30,
                "swap_total_bytes": 0,
                "swap_used_bytes": 0,
                "error": "",
                "fresh": system_fresh,
            },
            "neuron_hw_counters": {
                "period": period,
                "neuron_devices": [
                    {
                        "neuron_device_index": d,
                        "mem_ecc_corrected": 0,
                        "mem_ecc_uncorrected": ecc.get(d, (0, 0))[0],
                        "sram_ecc_uncorrected": ecc.get(d, (0, 0))[1],
                        "sram_ecc_corrected": 0,
                    }
                    for d in range(devices)
                ],
                "error": "",
                "fresh": system_fresh,
            },
            "vcpu_usage": {
                "period": period,
                "average_usage": cpu,
                "usage_data": {"0": cpu, "1": cpu},
                "context_switch_count": 1000,
                "error": "",
                "fresh": system_fresh,
            },
        },
        "instance_info": {
            "instance_name": "",
            "instance_id": instance,
            "instance_type": "trn1.32xlarge",
            "instance_availability_zone": "us-west-2a",
            "instance_availability_zone_id": "usw2-az1",
            "instance_region": "us-west-2",
            "ami_id": "ami-0",
            "subnet_id": "subnet-0",
            "error": "",
        },
        "neuron_hardware_info": {
            "neuron_device_type": "trainium",
            "neuroncore_version": "v2",
            "neuron_device_count": devices,
            "neuron_device_memory_size": 34359738368,
            "neuroncore_per_device_count": per_device,
            "error": "",
        },
        "report_time": t,
    }


def record(path: Path, reports: list[dict[str, Any]], **recorder: Any) -> Path:
    with Recorder(path, **recorder) as r:
        for rep in reports:
            r.append(orjson.dumps(rep) + b"\n")
    return path
