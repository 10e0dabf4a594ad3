"""System-level groups (``system_data``) and the info objects -> gauge samples, plus the system counters.

The families and values come from each group's spec (``neuron_monitor/groups/<name>/spec.py``); this module files them
under the instance labels. ``instance_info`` and ``neuron_hardware_info`` become info metrics, as in AWS's
exporter.
"""

from __future__ import annotations

from neuron_monitor.exporters.prometheus.context import COUNTERS, ShapeContext
from neuron_monitor.exporters.prometheus.families import INFO
from neuron_monitor.exporters.prometheus.labels import instance_info_extras, instance_labels
from neuron_monitor.exporters.prometheus.ledger import SYSTEM
from neuron_monitor.exporters.prometheus.values import MalformedReport
from neuron_monitor.schema.info import HARDWARE_KEYS, HardwareInfo, InstanceInfo
from neuron_monitor.schema.read import Report
from neuron_monitor.schema.spec import counter_family


def shape_system(ctx: ShapeContext, report: Report) -> None:
    """System gauges from each usable system group's spec, then the system counters as accumulated."""
    for group in report.system.values():
        if not group.usable:
            continue
        data, problems = group.read()
        ctx.emit(group.spec.gauges(data))
        if problems:  # checked after the gauges: parts read on demand add their problems while read
            raise MalformedReport(problems.first())
    inst = ctx.inst_values
    heads = ctx.table.of(inst, COUNTERS)  # the previous report's tuples (see ``context.LabelTable``)
    for key, total in ctx.totals.get(SYSTEM, {}).items():
        family = counter_family(key[0])
        if family is not None:
            labels = heads.get(key)
            if labels is None:
                labels = heads[key] = (*inst, *key[1:])
                ctx.table.size += 1
            ctx.samples_of(family)[labels] = total


def shape_info(ctx: ShapeContext, instance_info: InstanceInfo | None, hardware_info: HardwareInfo | None) -> None:
    """``instance_info`` always carries the instance labels; ``neuron_hardware_info`` the hardware fields."""
    if instance_info is not None:
        names, values = instance_labels(instance_info)
        extra_names, extra_values = instance_info_extras(instance_info)
        ctx.fams.family("instance", INFO, "EC2 instance information", (*names, *extra_names)).samples[
            (*values, *extra_values)
        ] = 1.0
    if hardware_info is not None:
        fields = [(k, hardware_info.get(k)) for k in HARDWARE_KEYS]  # the info metric labels are the keys
        present = [k for k, v in fields if v is not None]
        values = tuple(str(v) for _, v in fields if v is not None)
        ctx.fams.family("neuron_hardware", INFO, "Neuron Hardware Information", (*ctx.inst_names, *present)).samples[
            (*ctx.inst_values, *values)
        ] = 1.0
