"""neuron_runtime_vcpu_usage against real child processes: CPU share, exit mid-period, first sight."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from neuron_monitor.groups.neuron_runtime_vcpu_usage.collector import CLOCK_TICKS, NeuronRuntimeVcpuUsage
from neuron_monitor.host.procfs import parse_pid_stat
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.app import App

BURN = "import sys, time\nprint('ready', flush=True)\nend=time.time()+60\nwhile time.time()<end: pass\n"
IDLE = "import time; print('ready', flush=True); time.sleep(60)"
DEADLINE = 60.0  # seconds a condition may take on a loaded, CPU-stealing machine


def _spawn(code: str) -> subprocess.Popen[bytes]:
    """A child Python that has finished starting up (its start-up CPU time is behind it) when this returns."""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert p.stdout is not None and p.stdout.readline() == b"ready\n"
    return p


def _cpu_seconds(pid: int) -> float:
    st = parse_pid_stat(Path(f"/proc/{pid}/stat").read_bytes())
    return (st.utime + st.stime) / CLOCK_TICKS


def _wait_for_cpu(pid: int, since: float, seconds: float) -> None:
    """Wait until ``pid`` has used ``seconds`` of CPU time more than ``since`` (however slowly the host gives it)."""
    deadline = time.monotonic() + DEADLINE
    while _cpu_seconds(pid) - since < seconds:
        assert time.monotonic() < deadline, f"pid {pid} got under {seconds} s of CPU in {DEADLINE} s"
        time.sleep(0.05)


def _used(body: dict[str, Any]) -> float:
    """CPU seconds a body says its process used over its period."""
    u = body["vcpu_usage"]
    return (u["user"] + u["system"]) / 100.0 * body["period"]


def test_busy_and_idle_processes() -> None:
    """The shares are the CPU time each process used between two collections, over the time between them: checked
    against the processes' own counters, not against how much CPU a loaded host happened to give them."""
    busy, idle = _spawn(BURN), _spawn(IDLE)
    try:
        g = NeuronRuntimeVcpuUsage(RootFS("/"))
        apps = [App(busy.pid, "busy"), App(idle.pid, "idle")]
        first = g.collect(apps, [])
        t0, busy0, idle0 = time.monotonic(), _cpu_seconds(busy.pid), _cpu_seconds(idle.pid)
        assert set(first) == {busy.pid, idle.pid}
        assert first[busy.pid]["period"] >= 0
        _wait_for_cpu(busy.pid, busy0, 0.3)
        busy1, idle1, waited = _cpu_seconds(busy.pid), _cpu_seconds(idle.pid), time.monotonic() - t0
        out = g.collect(apps, [])
        b, i = out[busy.pid], out[idle.pid]
        tick = 1.0 / CLOCK_TICKS
        assert b["period"] == i["period"] >= waited  # one clock for every app; the window contains the wait
        assert _used(b) >= busy1 - busy0 - 2 * tick  # at least what this test saw it use inside the window
        assert b["vcpu_usage"]["user"] + b["vcpu_usage"]["system"] <= 100.0 + 100.0 * 2 * tick / b["period"]
        assert idle1 - idle0 <= 2 * tick and _used(i) <= 3 * tick  # a sleeping process uses no CPU
        g.close()
    finally:
        for p in (busy, idle):
            p.kill()
            p.wait()
            assert p.stdout is not None
            p.stdout.close()


def _watched_then_killed() -> tuple[NeuronRuntimeVcpuUsage, App]:
    """A group that has seen a process once, and that process killed since."""
    p = _spawn(IDLE)
    g = NeuronRuntimeVcpuUsage(RootFS("/"))
    app = App(p.pid, "x")
    g.collect([app], [])
    p.kill()
    p.wait()
    assert p.stdout is not None
    p.stdout.close()
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
    spawned = time.monotonic()
    busy = _spawn(BURN)
    try:
        (tmp_path / "proc").mkdir()
        (tmp_path / "proc" / "uptime").write_text("5.00 5.00\n")  # the fake root's own clock: not the process's
        (tmp_path / "proc" / str(busy.pid)).symlink_to(f"/proc/{busy.pid}")
        _wait_for_cpu(busy.pid, 0.0, 0.5)
        used = _cpu_seconds(busy.pid)
        g = NeuronRuntimeVcpuUsage(RootFS(tmp_path))
        first = g.collect([App(busy.pid, "busy")], [])[busy.pid]
        lived = time.monotonic() - spawned
        assert first.get("error", "") == ""
        assert used - 0.02 <= first["period"] <= lived + 0.02  # the process's life, by the real procfs's uptime
        assert _used(first) >= used - 0.02  # its whole CPU time so far (start-up included)
        g.close()
    finally:
        busy.kill()
        busy.wait()
        assert busy.stdout is not None
        busy.stdout.close()
