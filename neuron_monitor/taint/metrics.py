"""``neuron_monitor_taint_*``: the counters as Prometheus text, written to a file for node-exporter's textfile
collector (``--metrics-file``), replaced atomically (a temporary file renamed over it) so a reader never sees half."""

from __future__ import annotations

import contextlib
import os
import tempfile

from neuron_monitor.taint.engine import Counters

_FAMILIES = (
    (
        "changes",
        "neuron_monitor_taint_changes_total",
        "action",
        "DeviceTaintRule changes made (create, delete, update, adopt)",
    ),
    (
        "refused",
        "neuron_monitor_taint_refused_total",
        "reason",
        "Changes held back or refused (rate_limit, node_cap, unmapped, conflict, changed)",
    ),
    (
        "api_errors",
        "neuron_monitor_taint_api_errors_total",
        "status",
        "API calls that failed after their retries, by HTTP status (no_answer: none)",
    ),
)


def render(counters: Counters, rules: int, unmapped: int) -> str:
    """The exposition text of the counters and the two gauges."""
    lines: list[str] = []
    for attr, name, label, text in _FAMILIES:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} counter"]
        for key, value in sorted(getattr(counters, attr).items()):
            lines.append(f'{name}{{{label}="{key}"}} {value}')
    lines += [
        "# HELP neuron_monitor_taint_rules DeviceTaintRules this node holds",
        "# TYPE neuron_monitor_taint_rules gauge",
        f"neuron_monitor_taint_rules {rules}",
        "# HELP neuron_monitor_taint_unmapped_devices Unhealthy devices past the grace period with no DRA device name",
        "# TYPE neuron_monitor_taint_unmapped_devices gauge",
        f"neuron_monitor_taint_unmapped_devices {unmapped}",
        "# HELP neuron_monitor_taint_reports_total Reports read",
        "# TYPE neuron_monitor_taint_reports_total counter",
        f"neuron_monitor_taint_reports_total {counters.reports}",
    ]
    return "\n".join(lines) + "\n"


def write_atomically(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` (a temporary file in the same directory, renamed over it)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".taint-", suffix=".prom", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
