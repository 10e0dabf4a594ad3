"""``neuroncore_info{neuroncore, neuron_device_index}``: which Neuron device each NeuronCore is on, for joins.

One series per logical NeuronCore of the host (``neuron_device_count`` x ``neuroncore_per_device_count`` from
``neuron_hardware_info``), value 1, with the instance labels when they go on every series. Under
``--core-labels aws`` it is the only series that pairs a core with its device, e.g.

    sum by (neuron_device_index) (neuroncore_utilization_ratio * on (neuroncore) group_left (neuron_device_index)
                                  neuroncore_info)

Under ``--core-labels device`` (the default) the per-core series carry the device themselves, so the default
series budget leaves this family out (``budget``); ``--series-detail full`` serves it in both modes.
"""

from __future__ import annotations

from neuron_monitor.exporters.prometheus.context import ShapeContext
from neuron_monitor.exporters.prometheus.families import INFO
from neuron_monitor.exporters.prometheus.labels import kept_string
from neuron_monitor.schema.info import HardwareInfo

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
