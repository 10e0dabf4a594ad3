"""What the daemon found of the Neuron driver's nodes -> ``neuron_monitor_source_found{group, source}``.

Read through the schema (`Report.sources`: the report's ``neuron_monitor.sources``, each group's node families
found or not and the families this host must expose, ``required``: check/required.py). Per group that reports
sources, ``source="all"`` is 1 when every required family was found and 0 when one is missing (the alert
``NeuronMonitorSourceMissing`` and the dashboards read it); a family series per node family is 1 (found) or 0.

Series budget: with ``--series-detail full`` every family of every group; by default (``budget``) the ``all``
series of each group and the required families that are missing only, so a node that reads everything serves one
series per group (3 on a host with the three sysfs groups) and a node that does not names what it misses. A
family an older driver or an Inf1 never exposes is not required: it is served (as 0) with full detail only, and
never makes ``all`` 0. Reports without the object (AWS's daemon, a host-only configuration) serve none.
"""

from __future__ import annotations

from neuron_monitor.exporters.prometheus.context import ShapeContext
from neuron_monitor.exporters.prometheus.families import GAUGE
from neuron_monitor.schema.info import Sources

FAMILY = "neuron_monitor_source_found"
ALL = "all"
HELP = (
    '1 when the daemon found the driver node family (source) a group reads, 0 when not; source="all": every '
    "node family this host must expose was found (run neuron-monitor --check on the node when 0)"
)


def shape_sources(ctx: ShapeContext, sources: Sources | None) -> None:
    if sources is None or not sources.groups:
        return
    inst = ctx.inst_values
    samples = ctx.fams.family(FAMILY, GAUGE, HELP, (*ctx.inst_names, "group", "source")).samples
    for group, info in sources.groups.items():
        missing = info.required_missing
        samples[(*inst, group, ALL)] = 0.0 if missing else 1.0
        if ctx.full_detail:
            for family, found in info.found.items():
                samples[(*inst, group, family)] = 1.0 if found else 0.0
        else:
            for family in missing:
                samples[(*inst, group, family)] = 0.0
