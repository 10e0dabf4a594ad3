"""neuron_runtime_vcpu_usage against real child processes: CPU share, exit mid-period, first sight."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_monitor.app import App
from neuron_monitor.groups.neuron_runtime_vcpu_usage import CLOCK_TICKS, NeuronRuntimeVcpuUsage
from neuron_monitor.host.procfs import parse_pid_stat
from neuron_monitor.host.rootfs import RootFS

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


# -- the batch read (usage_batch_native) against the per-application path ---------------------------------------

_SAMPLE = st.one_of(
    st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)).map(
        lambda t: f"77 (py thon) S {' '.join(['1'] * 10)} {t[0]} {t[1]} {' '.join(['0'] * 6)} 5 0 0\n".encode()
    ),
    st.tuples(st.integers(2**53 - 2, 2**53 + 2), st.integers(0, 9)).map(
        lambda t: f"77 (x) S {' '.join(['1'] * 10)} {t[0]} {t[1]} {' '.join(['0'] * 6)} 5 0 0\n".encode()
    ),
    st.binary(max_size=80),  # damaged
    st.just(b"77 (x) S " + b"1 " * 3000 + b"\n"),  # longer than the helper's read: the full read decides
    st.none(),  # the process exited: its file is gone
)


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rounds=st.lists(st.lists(_SAMPLE, min_size=3, max_size=3), min_size=2, max_size=5), data=st.data())
def test_the_batch_read_gives_what_the_per_application_read_does(
    tmp_path_factory: pytest.TempPathFactory, rounds: list[list[bytes | None]], data: st.DataObject,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    import neuron_monitor.groups.neuron_runtime_vcpu_usage as module

    clock = _Clock()
    monkeypatch.setattr(module, "time", clock)
    roots = [tmp_path_factory.mktemp("batch"), tmp_path_factory.mktemp("per_app")]
    pids = (101, 102, 103)
    groups = [NeuronRuntimeVcpuUsage(RootFS(root)) for root in roots]
    per_app = module.usage_batch_native
    try:
        for samples in rounds:
            for root in roots:
                for pid, sample in zip(pids, samples, strict=True):
                    path = root / "proc" / str(pid) / "stat"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    if sample is None:
                        path.unlink(missing_ok=True)
                    else:
                        path.write_bytes(sample)  # in place: a kept descriptor reads the new bytes
            clock.now += data.draw(st.sampled_from([0.1, 0.100289447, 0.0, 3.0]))
            apps = [App(pid, "t") for pid in pids]
            got = groups[0].collect(apps, [])
            monkeypatch.setattr(module, "usage_batch_native", lambda *a: {})
            want = groups[1].collect(apps, [])
            monkeypatch.setattr(module, "usage_batch_native", per_app)
            assert repr(got) == repr(want)
            assert {p: (b.utime, b.stime, b.t) for p, b in groups[0]._base.items()} == {
                p: (b.utime, b.stime, b.t) for p, b in groups[1]._base.items()
            }
    finally:
        for g in groups:
            g.close()


def test_the_batch_read_takes_open_files_and_declines_the_rest(tmp_path: Path) -> None:
    from neuron_monitor.groups.neuron_runtime_vcpu_usage import _Baseline, usage_batch_native

    (tmp_path / "proc" / "5").mkdir(parents=True)
    stat = tmp_path / "proc" / "5" / "stat"
    stat.write_bytes(b"5 (a) S " + b"1 " * 10 + b"300 200 " + b"0 " * 6 + b"5 0 0\n")
    kept = RootFS(tmp_path).open_kept("proc/5/stat")
    bases = {5: _Baseline(kept, 100, 100, 1.0)}
    if usage_batch_native(bases, [App(5, "a")], 2.0) == {}:  # not open yet: the per-application read opens it
        kept.read()
    got = usage_batch_native(bases, [App(5, "a")], 2.0)
    from neuron_monitor.native import NATIVE

    if NATIVE is None:
        assert got == {}
        return
    share = round(200 / CLOCK_TICKS * 100.0, 2)
    assert got == {5: {"period": 1.0, "vcpu_usage": {"user": share, "system": round(100 / CLOCK_TICKS * 100.0, 2)}}}
    assert (bases[5].utime, bases[5].stime, bases[5].t) == (300, 200, 2.0)
    stat.write_bytes(b"garbage")
    assert usage_batch_native(bases, [App(5, "a")], 3.0) == {}  # declined: the careful read words the error
    assert bases[5].t == 2.0
    kept.close()
