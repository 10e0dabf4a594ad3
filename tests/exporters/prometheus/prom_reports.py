"""Report builders for the Prometheus exporter tests and benchmark: AWS's shape plus our additive keys.

``trn2_report`` builds a full trn2.48xlarge report (16 devices, LNC=2 -> 64 logical NeuronCores, 192 vCPUs) with
one runtime per device by default; every count and value is derived from the arguments so tests can compute
the expected metrics independently.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

REPORTS_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "reports"
CWAGENT_REPORT = REPORTS_DIR / "cwagent-test_trn1n32xl_report_line.json"
WANDB_REPORTS = REPORTS_DIR / "wandb_trn1-2xl_reports.jsonl"

PERCENTILES = ("p0", "p1", "p25", "p50", "p75", "p99", "p100")
ERROR_KINDS = ("generic", "numerical", "transient", "model", "runtime", "hardware")
STATUS_KINDS = (
    "completed",
    "completed_with_err",
    "completed_with_num_err",
    "timed_out",
    "incorrect_input",
    "failed_to_queue",
)
INSTANCE = {
    "instance_name": "node-a",
    "instance_id": "i-0123456789abcdef0",
    "instance_type": "trn2.48xlarge",
    "instance_availability_zone": "us-east-2b",
    "instance_availability_zone_id": "use2-az2",
    "instance_region": "us-east-2",
    "ami_id": "ami-0123456789abcdef0",
    "subnet_id": "subnet-0123456789",
    "error": "",
}


def group(body: dict[str, Any], period: float = 1.0, fresh: bool | None = True, error: str = "") -> dict[str, Any]:
    obj: dict[str, Any] = {"period": period, **body, "error": error}
    if fresh is not None:
        obj["fresh"] = fresh
    return obj


def runtime(
    pid: int,
    tag: str,
    cores: list[int],
    completed: int = 10,
    generic_errors: int = 1,
    utilization: float = 50.0,
    period: float = 1.0,
    fresh: bool | None = True,
    flops: float | None = 1.0e12,
    v3d: bool = True,
    models: int = 2,
) -> dict[str, Any]:
    in_use: dict[str, Any] = {}
    for c in cores:
        core: dict[str, Any] = {"neuroncore_utilization": utilization + c % 7}
        if flops is not None:
            core["flops"] = flops
            core["effective_flops"] = flops / 2
        if v3d:
            core["v3d"] = {f"nc_v3.{2 * c + i}": {"neuroncore_utilization": utilization + i} for i in range(2)}
        in_use[str(c)] = core
    latency = {p: 0.001 * (i + 1) for i, p in enumerate(PERCENTILES)}
    return {
        "pid": pid,
        "neuron_runtime_tag": tag,
        "error": "",
        "report": {
            "execution_stats": group(
                {
                    "error_summary": {k: (generic_errors if k == "generic" else 0) for k in ERROR_KINDS},
                    "execution_summary": {k: (completed if k == "completed" else 0) for k in STATUS_KINDS},
                    "latency_stats": {
                        "total_latency": latency,
                        "device_latency": {p: v / 2 for p, v in latency.items()},
                    },
                },
                period,
                fresh,
            ),
            "memory_used": group(
                {
                    "neuron_runtime_used_bytes": {
                        "host": 1_000_000 + pid,
                        "neuron_device": 2_000_000 * len(cores),
                        "usage_breakdown": {
                            "host": {
                                "application_memory": 600_000,
                                "constants": 100_000,
                                "dma_buffers": 300_000,
                                "tensors": pid,
                            },
                            "neuroncore_memory_usage": {
                                str(c): {
                                    "constants": 100_000,
                                    "model_code": 200_000,
                                    "model_shared_scratchpad": 0,
                                    "runtime_memory": 300_000,
                                    "tensors": 1_400_000,
                                }
                                for c in cores
                            },
                        },
                    },
                    "loaded_models": [
                        {
                            "name": f"model-{m}.neff",
                            "uuid": f"{m:032x}",
                            "model_id": 10000 + m,
                            "is_running": m == 0,
                            "subgraphs": {
                                "sg_00": {
                                    "memory_used_bytes": {"host": 2048, "neuron_device": 4096},
                                    "neuroncore_index": cores[0],
                                    "neuron_device_index": cores[0] // 4,
                                }
                            },
                        }
                        for m in range(models)
                    ],
                },
                period,
                fresh,
            ),
            "neuron_runtime_vcpu_usage": group({"vcpu_usage": {"user": 42.0, "system": 8.0}}, period, fresh),
            "neuroncore_counters": group({"neuroncores_in_use": in_use}, period, fresh),
        },
    }


def system_data(
    vcpus: int = 192,
    devices: int = 16,
    period: float = 1.0,
    fresh: bool | None = True,
    ecc: int = 0,
    context_switches: int = 1000,
) -> dict[str, Any]:
    usage = {"user": 20.0, "nice": 5.0, "system": 10.0, "idle": 60.0, "io_wait": 2.0, "irq": 1.0, "soft_irq": 2.0}
    return {
        "memory_info": group(
            {
                "memory_total_bytes": 2 * 1024**4,
                "memory_used_bytes": 1024**4,
                "swap_total_bytes": 0,
                "swap_used_bytes": 0,
            },
            period,
            fresh,
        ),
        "neuron_hw_counters": group(
            {
                "neuron_devices": [
                    {
                        "neuron_device_index": d,
                        "mem_ecc_corrected": ecc,
                        "mem_ecc_uncorrected": 0,
                        "sram_ecc_uncorrected": 0,
                        "sram_ecc_corrected": 0,
                    }
                    for d in range(devices)
                ]
            },
            period,
            fresh,
        ),
        "vcpu_usage": group(
            {
                "average_usage": usage,
                "usage_data": {str(i): dict(usage) for i in range(vcpus)},
                "context_switch_count": context_switches,
            },
            period,
            fresh,
        ),
    }


def trn2_report(
    runtimes: list[dict[str, Any]] | None = None,
    report_time: float = 1.7e9,
    k8s: dict[str, Any] | None = None,
    **system: Any,
) -> dict[str, Any]:
    if runtimes is None:
        runtimes = [runtime(1000 + d, f"job-{d:02d}", [4 * d + i for i in range(4)]) for d in range(16)]
    report: dict[str, Any] = {
        "neuron_runtime_data": runtimes,
        "system_data": system_data(**system),
        "instance_info": dict(INSTANCE),
        "neuron_hardware_info": {
            "neuron_device_type": "trainium2",
            "neuron_device_version": "v4",
            "neuroncore_version": "v3d",
            "neuron_device_count": 16,
            "neuron_device_memory_size": 103079215104,
            "neuroncore_per_device_count": 4,
            "logical_neuroncore_config": 2,
            "error": "",
        },
        "report_time": report_time,
        "neuron_monitor": {  # the daemon's own health, as our daemon writes it
            "version": "0.1.0",
            "start_time": report_time - 60.0,
            "reports": 12,
            "skipped_collections": 0,
            "collection_seconds": 0.003,
            "error": "",
        },
    }
    if k8s is not None:
        report["neuron_k8s_info"] = k8s
    return report
