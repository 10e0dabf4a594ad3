"""neuron_runtime_vcpu_usage against real child processes: CPU share, exit mid-period, first sight."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from neuron_monitor.groups.base import App
from neuron_monitor.groups.neuron_runtime_vcpu_usage import NeuronRuntimeVcpuUsage
from neuron_monitor.host.rootfs import RootFS

BURN = "import time\nend=time.time()+30\nwhile time.time()<end: pass\n"
IDLE = "import time; time.sleep(30)"


def _spawn(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


def test_busy_and_idle_processes() -> None:
    busy, idle = _spawn(BURN), _spawn(IDLE)
    try:
        g = NeuronRuntimeVcpuUsage(RootFS("/"))
        apps = [App(busy.pid, "busy"), App(idle.pid, "idle")]
        first = g.collect(apps, [])
        assert set(first) == {busy.pid, idle.pid}
        assert first[busy.pid]["period"] >= 0
        time.sleep(1.0)
        out = g.collect(apps, [])
        u = out[busy.pid]["vcpu_usage"]
        assert u["user"] + u["system"] > 30.0  # one spinning thread: most of one vCPU (shared with the suite)
        assert out[idle.pid]["vcpu_usage"]["user"] < 5.0
        assert 0.9 < out[busy.pid]["period"] < 5.0
        g.close()
    finally:
        busy.kill()
        idle.kill()
        busy.wait()
        idle.wait()


def _watched_then_killed() -> tuple[NeuronRuntimeVcpuUsage, App]:
    """A group that has seen a process once, and that process killed since."""
    p = _spawn(IDLE)
    g = NeuronRuntimeVcpuUsage(RootFS("/"))
    app = App(p.pid, "x")
    g.collect([app], [])
    p.kill()
    p.wait()
    return g, app


def test_exit_mid_period_gives_aws_error_not_a_crash() -> None:
    g, app = _watched_then_killed()
    out = g.collect([app], [])  # still listed (the source has not noticed yet) but the process is gone
    assert out[app.pid]["error"] == f"open /proc/{app.pid}/stat: no such file or directory"
    assert out[app.pid]["vcpu_usage"] == {"user": 0.0, "system": 0.0}
    gone = g.collect([], [app])
    assert gone == {}  # state already forgotten: reported once


def test_gone_app_reported_once() -> None:
    g, app = _watched_then_killed()
    assert app.pid in g.collect([], [app])
    assert g.collect([], [app]) == {}


def test_first_sight_covers_the_process_life_through_a_linked_proc(tmp_path: Path) -> None:
    """A root whose /proc/<pid> links to the real /proc/<pid> (the simulator, or a bind mount): the first report
    averages over the process's life, measured against the uptime of the procfs the process lives in."""
    busy = _spawn(BURN)
    try:
        (tmp_path / "proc").mkdir()
        (tmp_path / "proc" / "uptime").write_text("5.00 5.00\n")  # the fake root's own clock: not the process's
        (tmp_path / "proc" / str(busy.pid)).symlink_to(f"/proc/{busy.pid}")
        time.sleep(1.0)
        g = NeuronRuntimeVcpuUsage(RootFS(tmp_path))
        first = g.collect([App(busy.pid, "busy")], [])[busy.pid]
        assert first.get("error", "") == ""
        assert 0.5 < first["period"] < 30.0
        assert first["vcpu_usage"]["user"] + first["vcpu_usage"]["system"] > 20.0
        g.close()
    finally:
        busy.kill()
        busy.wait()
