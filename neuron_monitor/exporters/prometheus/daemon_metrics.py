"""The daemon's own health (the report's additive ``neuron_monitor`` object) -> ``neuron_monitor_daemon_*``.

``neuron_monitor_daemon_info{version}``, ``neuron_monitor_daemon_start_time_seconds``,
``neuron_monitor_daemon_skipped_collections_total`` (collection slots skipped because the reader or a collection
was slower than the period: the daemon's cumulative count, reset when it restarts),
``neuron_monitor_daemon_late_collections_total`` (collections started late: same reset rule) and
``neuron_monitor_daemon_collection_duration_seconds`` (how long the newest report's collection took). Reports
without the object (AWS's daemon) produce none of these.
"""

from __future__ import annotations

import math
from typing import Any

from neuron_monitor.exporters.prometheus.context import ShapeContext
from neuron_monitor.exporters.prometheus.families import COUNTER, GAUGE, INFO
from neuron_monitor.exporters.prometheus.values import number, text

PREFIX = "neuron_monitor_daemon"


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
