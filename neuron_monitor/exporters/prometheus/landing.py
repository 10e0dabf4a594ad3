"""The landing page at ``/``: the exporter's status at a glance, and where to go next.

Shows the health verdict, the version and pid (so that `make run` knows its own exporter answers), the newest
report's age against the staleness window, the runtimes and Neuron devices it describes, per-group status (error in
the newest report, errors since start), the input counters, and links to ``/metrics``, ``/healthz``, the Grafana
dashboard JSON (shipped in the package) and the docs. Every text on it goes through
`neuron_monitor.util.sanitize.html_text` (control and bidi characters made visible, HTML escaped): group names come from
the reports.
"""

from __future__ import annotations

import os

from neuron_monitor import __version__
from neuron_monitor.exporters.prometheus.collector import ExporterCollector
from neuron_monitor.util.sanitize import html_text

DOCS = "docs/prometheus.md in the neuron-monitor source tree (also docs/migrating-from-aws.md)"


def _row(name: str, value: object) -> str:
    return f"<tr><th>{html_text(name)}</th><td>{html_text(value)}</td></tr>"


def landing_page(exporter: ExporterCollector, dashboard: bool) -> str:
    state = exporter.state
    view = state.view()
    stats = exporter.stream_stats
    rows = [_row("status", view.reason), _row("version", __version__), _row("pid", os.getpid())]
    snapshot = view.snapshot
    if snapshot is not None and view.age is not None:
        rows.append(_row("newest report", f"{view.age:.1f} s ago (stale after {view.window:.1f} s)"))
        rows.append(_row("report interval", f"{view.interval:.3g} s"))
        rows.append(_row("runtimes", snapshot.runtimes))
        devices = snapshot.device_count()
        rows.append(_row("Neuron devices", devices if devices is not None else "unknown"))
        rows.append(_row("series", view.shaped.series if view.shaped else 0))
    rows.append(_row("input", f"{stats.lines} lines, {state.accepted_reports} reports, {stats.bad_lines} bad lines"))
    bad = {k: int(v) for k, v in state.bad_input_counts().items() if v}
    if bad:
        rows.append(_row("bad input", ", ".join(f"{k}: {v}" for k, v in bad.items())))
    groups = set(state.group_errors_total) | (snapshot.groups_seen if snapshot else set())
    group_rows = []
    for group in sorted(groups):
        failed = snapshot is not None and group in snapshot.groups_failed
        group_rows.append(
            f"<tr><td>{html_text(group)}</td><td>{'error' if failed else 'ok'}</td>"
            f"<td>{state.group_errors_total.get(group, 0)}</td></tr>"
        )
    links = [
        '<li><a href="metrics">/metrics</a>: Prometheus metrics</li>',
        '<li><a href="healthz">/healthz</a></li>',
        '<li><a href="readyz">/readyz</a></li>',
    ]
    if dashboard:
        links.append('<li><a href="dashboard.json">dashboard.json</a>: the Grafana dashboard</li>')
    links.append(f"<li>Documentation: {html_text(DOCS)}</li>")
    return (
        "<!DOCTYPE html>\n<html><head><title>neuron-monitor-prometheus</title>"
        "<style>body{font-family:sans-serif}th{text-align:left;padding-right:1em}td{padding-right:1em}</style>"
        "</head>\n<body><h1>neuron-monitor-prometheus</h1>\n"
        "<p>Serves neuron-monitor reports read from stdin as Prometheus metrics.</p>\n"
        f"<table>{''.join(rows)}</table>\n"
        "<h2>Metric groups</h2>\n<table><tr><th>group</th><th>newest report</th><th>errors since start</th></tr>"
        f"{''.join(group_rows)}</table>\n"
        f"<h2>Links</h2><ul>{''.join(links)}</ul>\n</body></html>\n"
    )
