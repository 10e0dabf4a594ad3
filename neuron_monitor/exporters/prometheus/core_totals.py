"""Values derived across runtimes (``RuntimeSum`` in the group specs) as Prometheus gauges: for each sum that
names a ``source`` and a ``total`` family, the source's per-runtime samples summed per NeuronCore, under the
instance labels and the core index only. Today that is ``neuroncore_utilization_total_ratio{neuroncore}`` (the
neuroncore_counters spec): the utilization every runtime reports for a core, summed, so that a dashboard with
several runtimes on one core never has to guess which runtime's zero is real. Compare it with
``neuroncore_busy_ratio`` (the device's own count, from the ``neuron_device_telemetry`` group), which also covers
processes whose data block cannot be read.

It is made from the samples of the same report after every runtime was shaped, so a runtime that gets no gauges
(one with an ``error``) adds nothing, as in the per-runtime family.
"""

from __future__ import annotations

import functools

from neuron_monitor.exporters.prometheus.context import ShapeContext
from neuron_monitor.exporters.prometheus.families import GAUGE
from neuron_monitor.schema.spec import PromFamily, registry


@functools.cache
def _sums() -> tuple[tuple[PromFamily, PromFamily], ...]:
    """(source family, total family) of every spec's cross-runtime sum that Prometheus shows."""
    return tuple(
        (s.source, s.total)
        for spec in registry().all()
        for s in spec.sums
        if s.source is not None and s.total is not None
    )


def shape_core_totals(ctx: ShapeContext) -> None:
    """Sum each declared source family's samples per NeuronCore into its total family."""
    at = len(ctx.runtime_names)  # the position of the neuroncore label in the core scope's labels
    for source, total in _sums():
        family = ctx.fams.by_name.get(source.name)
        if family is None or not family.samples:
            continue
        totals: dict[str, float] = {}
        for labels, value in family.samples.items():
            core = labels[at]
            totals[core] = totals.get(core, 0.0) + value
        out = ctx.fams.family(total.name, GAUGE, total.help, (*ctx.inst_names, *total.labels)).samples
        inst = ctx.inst_values
        for core, value in totals.items():
            out[(*inst, core)] = value
