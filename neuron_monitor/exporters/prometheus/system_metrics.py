"""System-level groups (``system_data``) and the info objects -> gauge samples, plus the system counters.

Compatible with AWS's exporter: ``system_vcpu_usage_ratio`` folds nice into user and io_wait/irq/soft_irq into
system, capped at 100 % and divided by 100; memory in bytes; ECC events per device (accumulated by ``counting``);
``instance_info`` and ``neuron_hardware_info`` as info metrics. Added: ``system_cpu_seconds_total`` by mode (all
vCPUs together) and ``system_context_switches_total``.
"""

from __future__ import annotations

from typing import Any

from neuron_monitor.exporters.prometheus.context import ShapeContext
from neuron_monitor.exporters.prometheus.counting import CPU_MODES
from neuron_monitor.exporters.prometheus.families import COUNTER, GAUGE, INFO
from neuron_monitor.exporters.prometheus.labels import instance_info_extras, instance_labels
from neuron_monitor.exporters.prometheus.ledger import SYSTEM
from neuron_monitor.exporters.prometheus.values import group_error, mapping, number, text
from neuron_monitor.report import group_data_usable

MEMORY_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("memory_total_bytes", "system_memory_total_bytes", "System memory total_bytes bytes"),
    ("memory_used_bytes", "system_memory_used_bytes", "System memory used_bytes bytes"),
    ("swap_total_bytes", "system_swap_total_bytes", "System swap total_bytes bytes"),
    ("swap_used_bytes", "system_swap_used_bytes", "System swap used_bytes bytes"),
)
HARDWARE_LABELS: tuple[str, ...] = (
    "neuron_device_count",
    "neuroncore_per_device_count",
    "neuron_device_memory_size",
    "neuron_device_type",
    "neuron_device_version",
    "neuroncore_version",
    "logical_neuroncore_config",
)
SYSTEM_COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "hardware_ecc_events": ("Hardware ecc events total", ("neuron_device_index", "event_type")),
    "system_cpu_seconds": ("Seconds all vCPUs spent in each mode", ("mode",)),
    "system_context_switches": ("Context switches on all vCPUs", ()),
}


def vcpu_usage(ctx: ShapeContext, obj: dict[str, Any], where: str) -> None:
    usage_data = mapping(obj.get("usage_data"), f"{where}.usage_data")
    if usage_data is not None:
        ctx.fams.family("system_vcpu_count", GAUGE, "System vCPU count", ctx.inst_names).samples[ctx.inst_values] = (
            float(len(usage_data))
        )
    average = mapping(obj.get("average_usage"), f"{where}.average_usage")
    if average is not None:
        pct = {mode: number(average.get(mode), f"{where}.average_usage.{mode}") or 0.0 for mode in CPU_MODES}
        samples = ctx.fams.family(
            "system_vcpu_usage_ratio", GAUGE, "System CPU utilization ratio", (*ctx.inst_names, "usage_type")
        ).samples
        samples[(*ctx.inst_values, "user")] = min(pct["user"] + pct["nice"], 100.0) / 100.0
        system = pct["system"] + pct["io_wait"] + pct["irq"] + pct["soft_irq"]
        samples[(*ctx.inst_values, "system")] = min(system, 100.0) / 100.0


def memory_info(ctx: ShapeContext, obj: dict[str, Any], where: str) -> None:
    for key, family, help_text in MEMORY_GAUGES:
        value = number(obj.get(key), f"{where}.{key}")
        if value is not None:
            ctx.fams.family(family, GAUGE, help_text, ctx.inst_names).samples[ctx.inst_values] = value


SYSTEM_HANDLERS = {"vcpu_usage": vcpu_usage, "memory_info": memory_info}


def shape_system(ctx: ShapeContext, system_data: dict[str, Any]) -> None:
    """System gauges from ``system_data`` (ECC events are counters only), then the system counters."""
    for name, obj in system_data.items():
        handler = SYSTEM_HANDLERS.get(name)
        if handler is None:
            continue
        where = f"system_data.{name}"
        obj = mapping(obj, where)
        if obj is not None and (not group_error(obj, where) or group_data_usable(name, obj)):
            handler(ctx, obj, where)
    for key, total in ctx.totals.get(SYSTEM, {}).items():
        help_text, names = SYSTEM_COUNTERS[key[0]]
        ctx.fams.family(key[0], COUNTER, help_text, (*ctx.inst_names, *names)).samples[(*ctx.inst_values, *key[1:])] = (
            total
        )


def shape_info(ctx: ShapeContext, instance_info: dict[str, Any] | None, hardware_info: dict[str, Any] | None) -> None:
    """``instance_info`` always carries the instance labels; ``neuron_hardware_info`` the hardware fields."""
    if instance_info is not None:
        names, values = instance_labels(instance_info)
        extra_names, extra_values = instance_info_extras(instance_info)
        ctx.fams.family("instance", INFO, "EC2 instance information", (*names, *extra_names)).samples[
            (*values, *extra_values)
        ] = 1.0
    if hardware_info is not None:
        present = [k for k in HARDWARE_LABELS if hardware_info.get(k) is not None]
        values = tuple(text(hardware_info[k], f"neuron_hardware_info.{k}") for k in present)
        ctx.fams.family("neuron_hardware", INFO, "Neuron Hardware Information", (*ctx.inst_names, *present)).samples[
            (*ctx.inst_values, *values)
        ] = 1.0
