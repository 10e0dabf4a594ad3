"""The report's ``neuron_monitor`` object (our daemon's word about itself) -> ``neuron_monitor_daemon_*`` and
``neuron_monitor_source_found``. Reports without the object (AWS's daemon, a host-only configuration) produce none.

The daemon's own health (``shape_daemon``): ``neuron_monitor_daemon_info{version}``,
``neuron_monitor_daemon_start_time_seconds``, ``neuron_monitor_daemon_skipped_collections_total`` (collection slots
skipped because the reader or a collection was slower than the period: the daemon's cumulative count, reset when
it restarts), ``neuron_monitor_daemon_late_collections_total`` (collections started late: same reset rule) and
``neuron_monitor_daemon_collection_duration_seconds`` (how long the newest report's collection took), and
``neuron_monitor_daemon_error`` (1, served only while the report's ``neuron_monitor.error`` is not empty: the daemon
could not see part of the host, e.g. a listed device whose applications it cannot list).

The driver the daemon read (``shape_sources``): ``neuron_driver_info{version}`` (1, the report's
``neuron_monitor.driver_version`` as ``/sys/module/neuron/version`` gives it; absent when the daemon could not read
it), so a fleet can be counted by driver version (a driver older than 2.30.2 serves no health flag, docs/health.md).

What the daemon found of the Neuron driver's nodes (``shape_sources``) -> ``neuron_monitor_source_found{group,
source}``, read through the schema (`Report.sources`: the object's ``sources``, each group's node families found
or not and the families this host must expose, ``required``: check/required.py). Per group that reports sources,
``source="all"`` is 1 when every required family was found and 0 when one is missing (the alert
``NeuronMonitorSourceMissing`` and the dashboards read it); a family series per node family is 1 (found) or 0.
Series budget: with ``--series-detail full`` every family of every group; by default (``budget``) the ``all``
series of each group and the required families that are missing only, so a node that reads everything serves one
series per group (3 on a host with the three sysfs groups) and a node that does not names what it misses. A
family an older driver or an Inf1 never exposes is not required: it is served (as 0) with full detail only, and
never makes ``all`` 0.
"""

from __future__ import annotations

import math
from typing import Any

from neuron_monitor.exporters.prometheus.context import ShapeContext
from neuron_monitor.exporters.prometheus.families import COUNTER, GAUGE, INFO
from neuron_monitor.exporters.prometheus.values import number, text
from neuron_monitor.schema.info import Sources

PREFIX = "neuron_monitor_daemon"
ERROR_HELP = (
    "1 while the daemon's report says it could not see part of the host (neuron_monitor.error, e.g. a Neuron "
    "device whose applications cannot be listed: their runtimes are missing, not idle); absent otherwise"
)


def shape_daemon(ctx: ShapeContext, daemon: dict[str, Any] | None) -> None:
    if not daemon:
        return
    where = "neuron_monitor"
    labels, values = ctx.inst_names, ctx.inst_values
    version = text(daemon.get("version"), f"{where}.version")
    ctx.fams.family(PREFIX, INFO, "neuron-monitor daemon version", (*labels, "version")).samples[(*values, version)] = (
        1.0
    )
    for key, name, kind, help_text in (
        ("start_time", "start_time_seconds", GAUGE, "When the neuron-monitor daemon started (epoch seconds)"),
        (
            "skipped_collections",
            "skipped_collections",
            COUNTER,
            "Collection slots the daemon skipped because its reader or a collection was slower than the period",
        ),
        (
            "late_collections",
            "late_collections",
            COUNTER,
            "Collections the daemon started over 0.1 s (or a quarter period) behind their due time",
        ),
        ("collection_seconds", "collection_duration_seconds", GAUGE, "Duration of the newest report's collection"),
    ):
        value = number(daemon.get(key), f"{where}.{key}")
        if value is not None and (kind != COUNTER or 0.0 <= value < math.inf):  # a counter is never negative
            ctx.fams.family(f"{PREFIX}_{name}", kind, help_text, labels).samples[values] = value
    if text(daemon.get("error"), f"{where}.error"):  # served while there is one (series budgets unchanged)
        ctx.fams.family(f"{PREFIX}_error", GAUGE, ERROR_HELP, labels).samples[values] = 1.0


FAMILY = "neuron_monitor_source_found"
ALL = "all"
HELP = (
    '1 when the daemon found the driver node family (source) a group reads, 0 when not; source="all": every '
    "node family this host must expose was found (run neuron-monitor --check on the node when 0)"
)


DRIVER_FAMILY = "neuron_driver"  # an INFO family: served as neuron_driver_info
DRIVER_HELP = "The Neuron driver version the daemon read (/sys/module/neuron/version); absent when unreadable"
DRIVER_VERSION_CHARS = 64  # as much as the daemon reads of the file


def shape_sources(ctx: ShapeContext, sources: Sources | None) -> None:
    if sources is None:
        return
    if sources.driver_version:  # "" (unreadable) or None (not said): no series, never a made-up version
        labels = (*ctx.inst_names, "version")
        version = sources.driver_version[:DRIVER_VERSION_CHARS]
        ctx.fams.family(DRIVER_FAMILY, INFO, DRIVER_HELP, labels).samples[(*ctx.inst_values, version)] = 1.0
    if not sources.groups:
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
