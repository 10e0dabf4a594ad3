"""The terminal library is neuron-monitor-top's alone: the daemon and the exporters never load it."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
import {modules}
loaded = sorted(m for m in sys.modules if m == "rich" or m.startswith(("rich.", "neuron_monitor.top")))
print(",".join(loaded))
"""


def loaded_after_import(*modules: str) -> list[str]:
    code = CHECK.format(modules=", ".join(modules))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


def test_daemon_and_exporters_do_not_import_the_terminal_library() -> None:
    assert (
        loaded_after_import(
            "neuron_monitor.daemon.cli",
            "neuron_monitor.exporters.prometheus.cli",
            "neuron_monitor.exporters.cloudwatch.cli",
            "neuron_monitor.timeline.trace_cli",
            "neuron_monitor.timeline.det_cli",
            "neuron_monitor.sim.cli",
        )
        == []
    )


def test_top_loads_the_terminal_library_only_for_the_terminal() -> None:
    loaded = loaded_after_import("neuron_monitor.top.cli")
    assert "neuron_monitor.top.cli" in loaded
    assert not any(m == "rich" or m.startswith("rich.") for m in loaded)  # --once to a pipe needs no Rich
    assert "rich" in loaded_after_import("neuron_monitor.top.terminal")
