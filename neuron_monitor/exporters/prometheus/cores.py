"""Families the exporter derives per NeuronCore from a whole report: the device join table and totals across runtimes.

``neuroncore_info{neuroncore, neuron_device_index}`` (``shape_core_info``): which Neuron device each NeuronCore is
on, for joins. One series per logical NeuronCore of the host (``neuron_device_count`` x
``neuroncore_per_device_count`` from ``neuron_hardware_info``), value 1, with the instance labels when they go on
every series. Under ``--core-labels aws`` it is the only series that pairs a core with its device, e.g.

    sum by (neuron_device_index) (neuroncore_utilization_ratio * on (neuroncore) group_left (neuron_device_index)
                                  neuroncore_info)

Under ``--core-labels device`` (the default) the per-core series carry the device themselves, so the default
series budget leaves this family out (``budget``); ``--series-detail full`` serves it in both modes.

Totals across runtimes (``shape_core_totals``; ``RuntimeSum`` in the group specs) as Prometheus gauges: for each
sum that names a ``source`` and a ``total`` family, the source's per-runtime samples summed per NeuronCore, under
the instance labels and the core index only. Today that is ``neuroncore_utilization_total_ratio{neuroncore}`` (the
neuroncore_counters spec): the utilization every runtime reports for a core, summed, so that a dashboard with
several runtimes on one core never has to guess which runtime's zero is real. Compare it with
``neuroncore_busy_ratio`` (the device's own count, from the ``neuron_device_telemetry`` group), which also covers
processes whose data block cannot be read. It is made from the samples of the same report after every runtime
was shaped, so a runtime that gets no gauges (one with an ``error``) adds nothing, as in the per-runtime family.
"""

from __future__ import annotations

import functools

from neuron_monitor.exporters.prometheus.context import ShapeContext
from neuron_monitor.exporters.prometheus.families import GAUGE, INFO
from neuron_monitor.exporters.prometheus.labels import kept_string
from neuron_monitor.schema.info import HardwareInfo
from neuron_monitor.schema.spec import PromFamily, registry

FAMILY = "neuroncore"  # exposed as neuroncore_info
MAX_CORES = 4096  # far above any instance (a Trn2 has 128 logical cores at LNC=1); a bigger count is not real
HELP = "The Neuron device of each NeuronCore (value 1), to join per-core series with device labels"


def shape_core_info(ctx: ShapeContext, hardware_info: HardwareInfo | None) -> None:
    """Add one ``neuroncore_info`` sample per logical NeuronCore the hardware info counts (none if it cannot)."""
    if hardware_info is None:
        return
    devices = hardware_info.neuron_device_count
    per_device = hardware_info.neuroncore_per_device_count
    if not devices or not per_device or devices < 0 or per_device < 0 or devices * per_device > MAX_CORES:
        return
    samples = ctx.fams.family(FAMILY, INFO, HELP, (*ctx.inst_names, "neuroncore", "neuron_device_index")).samples
    cores = int(per_device)
    for device in range(int(devices)):
        dev = kept_string(str(device))
        for core in range(device * cores, (device + 1) * cores):
            samples[(*ctx.inst_values, kept_string(str(core)), dev)] = 1.0


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
