"""The landing page at ``/``: which host this is, whether its Neuron devices are healthy, and where to go next.

At the top: the host (instance id, instance type, availability zone, the node's name from ``NODE_NAME`` as the
DaemonSet sets it, else the host name), the node's health verdict and each device's, and the newest report's age,
which a small inline script keeps current without a reload (it counts from the age the page was rendered with, so
the browser's clock does not matter).
Below: the exporter's status, version and pid (so that `make run` knows its own exporter answers), per-group status
and input counters, and links to ``/metrics``, ``/healthz``, ``/readyz``, the Grafana dashboard JSON and the docs
the package ships (served at ``/docs/``, so the link works from an installed package without network).

Safety: every text on it goes through `neuron_monitor.util.sanitize.html_text` (control and bidi characters made
visible, HTML escaped); the script writes only numbers, with ``textContent``. The page is served with a strict
Content-Security-Policy (``CSP``): no source at all but the one inline style and the one inline script, each allowed
by its SHA-256 hash.

What the page says about the host (``HostSummary``, ``summarize``) is read through the schema layer
(``schema.read.Report``): the verdicts come from the system group whose spec reads into ``NeuronDeviceHealth``
(whatever it is called), the host from ``instance_info``. It is taken when a report is shaped, before its typed
values are let go (``snapshot.Snapshot.shaped``), so the page never keeps a report. Strings are kept as the report
has them (clipped); the page escapes them.
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING

from neuron_monitor import __version__
from neuron_monitor.groups.neuron_device_health.body import STATES
from neuron_monitor.groups.neuron_device_health.spec import NeuronDeviceHealth
from neuron_monitor.schema.read import Report
from neuron_monitor.util.sanitize import html_text

if TYPE_CHECKING:  # the collector's modules import this one (a report's summary is taken while shaping)
    from neuron_monitor.exporters.prometheus.collector import ExporterCollector


STYLE = (
    "body{font-family:sans-serif;margin:1.5em}th{text-align:left;padding-right:1em}td{padding-right:1em}"
    ".healthy{color:#1a7f37}.unhealthy{color:#cf222e;font-weight:bold}.unknown{color:#9a6700}"
    "#verdict{font-size:1.6em;margin:.3em 0}#host{color:#444}"
)
# Counts the newest report's age on from the value the page was rendered with (data-age), once a second; marks it
# stale past data-window. Writes numbers only, through textContent.
SCRIPT = (
    "(function(){var e=document.getElementById('report-age');if(!e){return;}"
    "var a=parseFloat(e.getAttribute('data-age')),w=parseFloat(e.getAttribute('data-window')),"
    "t=performance.now(),n=0;function u(){var s=a+(performance.now()-t)/1000;n+=1;"
    "e.textContent=s.toFixed(1)+' s ago'+(s>w?' (stale: no newer report)':'');"
    "e.setAttribute('data-updates',String(n));}setInterval(u,1000);})();"
)


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


CSP = (
    f"default-src 'none'; script-src {_hash(SCRIPT)}; style-src {_hash(STYLE)}; img-src 'none'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def node_name() -> tuple[str, str]:
    """(what it is, the name): the Kubernetes node's name when ``NODE_NAME`` is set, else this host's name."""
    name = os.environ.get("NODE_NAME", "").strip()
    return ("node", name) if name else ("host", socket.gethostname())


def _row(name: str, value: object) -> str:
    return f"<tr><th>{html_text(name)}</th><td>{html_text(value)}</td></tr>"


def _state(state: str) -> str:
    return f'<span class="{html_text(state)}">{html_text(state)}</span>'


def _host_line(summary: HostSummary | None) -> str:
    kind, name = node_name()
    parts = []
    if summary is not None and summary.instance_id:
        parts.append(f'instance <span id="instance-id">{html_text(summary.instance_id)}</span>')
    if summary is not None and summary.instance_type:
        parts.append(f'<span id="instance-type">{html_text(summary.instance_type)}</span>')
    if summary is not None and summary.availability_zone:
        parts.append(f'<span id="zone">{html_text(summary.availability_zone)}</span>')
    parts.append(f'{html_text(kind)} <span id="node-name">{html_text(name)}</span>')
    return f'<p id="host">{" &middot; ".join(parts)}</p>'


def _verdicts(summary: HostSummary | None) -> str:
    if summary is None:
        return '<p id="verdict" class="unknown">Node health: unknown (no report yet)</p>'
    if not summary.verdicts:
        return (
            '<p id="verdict" class="unknown">Node health: unknown (the reports carry no health verdict: the '
            "daemon's configuration has no neuron_device_health group)</p>"
        )
    out = [f'<p id="verdict" class="{html_text(summary.node_state)}">Node health: {html_text(summary.node_state)}</p>']
    if summary.health_error:
        out.append(f'<p id="health-error">{html_text(summary.health_error)}</p>')
    rows = [
        f'<tr class="device" data-device="{html_text(d.device)}"><td>{html_text(d.device)}</td>'
        f"<td>{_state(d.state)}</td><td>{html_text('; '.join(d.reasons))}</td></tr>"
        for d in summary.devices
    ]
    if summary.more_devices:
        rows.append(f"<tr><td colspan=3>and {summary.more_devices} more devices (see /metrics)</td></tr>")
    out.append(
        '<table id="devices"><tr><th>Neuron device</th><th>health</th><th>reasons</th></tr>'
        + "".join(rows)
        + "</table>"
    )
    return "\n".join(out)


def landing_page(exporter: ExporterCollector, dashboard: bool, docs: bool = True) -> str:
    state = exporter.state
    view = exporter.serving_view()
    stats = exporter.stream_stats
    snapshot = view.snapshot
    summary = snapshot.summary if snapshot is not None else None
    age = "no report yet"
    if snapshot is not None and view.age is not None:
        age = (
            f'<span id="report-age" data-age="{view.age:.1f}" data-window="{view.window:.1f}">'
            f"{view.age:.1f} s ago</span> (stale after {view.window:.1f} s)"
        )
    rows = [_row("status", view.reason), _row("version", __version__), _row("pid", os.getpid())]
    if snapshot is not None and view.age is not None:
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
    if docs:
        links.append(
            '<li><a id="docs" href="docs/prometheus.md">Documentation</a> (shipped with the package; '
            '<a href="docs/">every page</a>)</li>'
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>neuron-monitor-prometheus</title>'
        f"<style>{STYLE}</style></head>\n<body><h1>neuron-monitor-prometheus</h1>\n"
        f"{_host_line(summary)}\n{_verdicts(summary)}\n"
        f'<p id="age">Newest report: {age}</p>\n'
        f'<h2>Exporter</h2>\n<table id="status">{"".join(rows)}</table>\n'
        '<h2>Metric groups</h2>\n<table id="groups"><tr><th>group</th><th>newest report</th>'
        f"<th>errors since start</th></tr>{''.join(group_rows)}</table>\n"
        f'<h2>Links</h2><ul id="links">{"".join(links)}</ul>\n'
        f"<script>{SCRIPT}</script>\n</body></html>\n"
    )


MAX_DEVICES = 256  # rows the page lists (a trn2.48xlarge has 16 devices, a Trn2 UltraServer node as many)
MAX_REASONS = 8
MAX_CHARS = 200
UNKNOWN = "unknown"


def _clip(text: object) -> str:
    s = "" if text is None else str(text)
    return s if len(s) <= MAX_CHARS else s[: MAX_CHARS - 3] + "..."


@dataclass(frozen=True)
class DeviceVerdict:
    device: str  # its index as the report writes it
    state: str  # healthy, unhealthy or unknown
    reasons: tuple[str, ...]  # "rule: message" (or the rule, or its detail)


@dataclass(frozen=True)
class HostSummary:
    verdicts: bool  # the report carries health verdicts at all
    node_state: str  # healthy, unhealthy or unknown ("" without verdicts)
    devices: tuple[DeviceVerdict, ...]
    more_devices: int  # devices past MAX_DEVICES, not listed
    health_error: str  # the health group's error, if any
    instance_id: str
    instance_type: str
    availability_zone: str


def _known_state(value: str | None) -> str:
    return value if value in STATES else UNKNOWN


def summarize(read: Report) -> HostSummary:
    health: NeuronDeviceHealth | None = None
    error = ""
    for group in read.system.values():
        value = group.data_as(NeuronDeviceHealth)
        if value is not None:
            health, error = value, group.error
            break
    devices: list[DeviceVerdict] = []
    if health is not None:
        for entry in health.devices[:MAX_DEVICES]:
            reasons = tuple(
                _clip(f"{r.rule}: {r.message or r.detail}" if (r.message or r.detail) else r.rule)
                for r in entry.reasons[:MAX_REASONS]
            )
            devices.append(DeviceVerdict(_clip(entry.label), _known_state(entry.state), reasons))
    node_state = ""
    if health is not None:
        node_state = _known_state(health.node_state)
        if health.node_state is None and devices:  # no node object: the worst device's state
            states = {d.state for d in devices}
            node_state = "unhealthy" if "unhealthy" in states else UNKNOWN if UNKNOWN in states else "healthy"
    info = read.instance_info
    return HostSummary(
        verdicts=health is not None,
        node_state=node_state,
        devices=tuple(devices),
        more_devices=max(len(health.devices) - MAX_DEVICES, 0) if health is not None else 0,
        health_error=_clip(error),
        instance_id=_clip(info.instance_id if info else ""),
        instance_type=_clip(info.instance_type if info else ""),
        availability_zone=_clip(info.instance_availability_zone if info else ""),
    )
