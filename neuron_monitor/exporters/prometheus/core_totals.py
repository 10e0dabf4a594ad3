"""``neuroncore_utilization_total_ratio{neuroncore}``: the utilization every runtime reports for a NeuronCore,
summed, so that a dashboard with several runtimes on one core never has to guess which runtime's zero is real.

It is made from the per-runtime ``neuroncore_utilization_ratio`` samples of the same report (after every runtime
was shaped), under the instance labels and the core index only. Compare it with ``neuroncore_busy_ratio`` (the
device's own count, from the ``neuron_device_telemetry`` group), which also covers processes whose data block
cannot be read.
"""

from __future__ import annotations

from neuron_monitor.exporters.prometheus.context import ShapeContext
from neuron_monitor.exporters.prometheus.families import GAUGE
from neuron_monitor.groups.neuroncore_counters.spec import FAM_UTIL

TOTAL_NAME = "neuroncore_utilization_total_ratio"
TOTAL_HELP = "NeuronCore utilization summed over every runtime that reports the core"


def shape_core_totals(ctx: ShapeContext) -> None:
    """Sum the runtimes' ``neuroncore_utilization_ratio`` samples per NeuronCore."""
    family = ctx.fams.by_name.get(FAM_UTIL.name)
    if family is None or not family.samples:
        return
    samples = family.samples
    at = len(ctx.runtime_names)  # the position of the neuroncore label in the core scope's labels
    totals: dict[str, float] = {}
    for labels, value in samples.items():
        core = labels[at]
        totals[core] = totals.get(core, 0.0) + value
    out = ctx.fams.family(TOTAL_NAME, GAUGE, TOTAL_HELP, (*ctx.inst_names, "neuroncore")).samples
    inst = ctx.inst_values
    for core, total in totals.items():
        out[(*inst, core)] = total
