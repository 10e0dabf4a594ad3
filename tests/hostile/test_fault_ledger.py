"""The fault-event ledger (``--state-dir``) under hostile conditions: every event in exactly one report across
reloads, watch ticks, counter growth, torn reads, failed saves and restarts; a state file that is not ours (nested
brackets, negative, NaN, huge values) is refused with a logged reason and the group keeps working."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import json
import logging
import os
import random
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_monitor.daemon.config import Plan, plan_from_data
from neuron_monitor.daemon.report import empty_hardware_info, empty_instance_info
from neuron_monitor.daemon.scheduler import Collector, Scheduler
from neuron_monitor.groups.neuron_device_health import collector as health
from neuron_monitor.groups.neuron_device_health.collector import STATE_FILE, NeuronDeviceHealth
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.sim.shapes import get_shape
from neuron_monitor.sim.temporary import TemporarySimulator
from neuron_monitor.sim.tree import DeviceTree, write_host_files
from tests.conftest import daemon_cmd
from tests.scheduler_fakes import NoApps, StepClock

SHAPE = "trn1.2xlarge"
DRIVER = "2.30.2.0"
COUNTERS = ("mem_ecc_uncorrected", "sram_ecc_uncorrected", "mem_ecc_repairable_uncorrected")


PLANS = [
    plan_from_data({"system_metrics": [{"type": "neuron_device_health", "period": "5s"}]}, "a.conf"),
    plan_from_data({"system_metrics": [{"type": "neuron_device_health", "period": "2s"}]}, "b.conf"),
    plan_from_data({"system_metrics": [{"type": "neuron_hw_counters", "period": "1s"}]}, "c.conf"),  # no health
    plan_from_data(
        {"system_metrics": [{"type": "neuron_hw_counters", "period": "1s"}, {"type": "neuron_device_health"}]},
        "d.conf",
    ),
]


class Host:
    """A simulated host's driver files: counters that grow, reset and are caught mid-write."""

    def __init__(self, root: Path) -> None:
        shape = get_shape(SHAPE)
        write_host_files(root, shape, DRIVER, shape.lnc)
        self.devs = [DeviceTree(root, shape, i, DRIVER) for i in range(shape.devices)]
        for d in self.devs:
            assert d.power is not None
            d.power.write(b"POWER_STATUS_VALID,1789180860,10.00,30.00,20.00\n")
        self.values = {(i, n): 0 for i in range(len(self.devs)) for n in COUNTERS}
        self.hw = dict.fromkeys(range(len(self.devs)), 0)
        self.hw_files = [d.dir / "stats/hardware/health_status/hw_error_event" for d in self.devs]
        self.true_events = 0

    def grow(self, dev: int, k: int, n: int) -> None:
        dev %= len(self.devs)
        if k == len(COUNTERS):
            self.hw[dev] += n
            self.hw_files[dev].write_bytes(b"%d\n" % self.hw[dev])
        else:
            key = (dev, COUNTERS[k])
            self.values[key] += n
            self.devs[dev].ecc[COUNTERS[k]].write(b"%d\n" % self.values[key])
        self.true_events += n

    def reset(self, dev: int, k: int, n: int) -> None:
        """A device reset: the counter starts again and counts ``n`` (> 0) new events."""
        dev %= len(self.devs)
        name = COUNTERS[k % len(COUNTERS)]
        if self.values[(dev, name)] <= n:
            return self.grow(dev, k % len(COUNTERS), n)
        self.values[(dev, name)] = n
        self.devs[dev].ecc[name].write(b"%d\n" % n)
        self.true_events += n
        return None

    def torn(self, dev: int, k: int) -> None:
        """A read caught between the simulator's pwrite and its truncate: the file holds no number for a moment."""
        dev %= len(self.devs)
        self.devs[dev].ecc[COUNTERS[k % len(COUNTERS)]].write(b"9\n\n7\n")

    def mend(self) -> None:
        for (dev, name), v in self.values.items():
            self.devs[dev].ecc[name].write(b"%d\n" % v)

    def close(self) -> None:
        for d in self.devs:
            d.close()


def _collector(root: Path, clock: StepClock, plan: Plan) -> Collector:
    return Collector(
        RootFS(root),
        plan,
        NoApps(),
        lambda: empty_hardware_info("none"),
        lambda: empty_instance_info("off EC2"),
        clock=clock,
    )


def _reported(report: dict[str, Any]) -> int:
    """The fault events a fresh health object of ``report`` carries (what the Prometheus exporter adds up)."""
    obj = report.get("system_data", {}).get("neuron_device_health")
    if not obj or obj.get("fresh") is False or "neuron_devices" not in obj:
        return 0
    return sum(e["count"] for d in obj["neuron_devices"] for e in d.get("fault_events", {}).values())


def _run(root: Path, clock: StepClock, plans: list[Plan], first: int, ops: list[tuple[Any, ...]], host: Host) -> int:
    """One daemon run (with ``plans[first]``) on the scheduler's stepped clock: ``ops`` happen between wake-ups (a
    reload swaps the plan as SIGHUP does); returns the fault events its reports carried."""
    collector = _collector(root, clock, plans[first])
    todo = list(ops)
    reported = 0

    async def sleep(delay: float) -> None:
        step = min(delay, 0.1)
        while delay > 0:
            clock.t += step
            delay -= step
            if todo:
                op = todo.pop(0)
                if op[0] == "grow":
                    host.grow(op[1], op[2], op[3])
                elif op[0] == "reset":
                    host.reset(op[1], op[2], op[3])
                elif op[0] == "torn":
                    host.torn(op[1], op[2])
                elif op[0] == "mend":
                    host.mend()
                elif op[0] == "reload":
                    collector.apply_plan(plans[op[1]])
                elif op[0] == "wait":
                    clock.t += op[1]
        clock.t += 0.003

    stop = asyncio.Event()

    async def write(line: bytes) -> None:
        nonlocal reported
        reported += _reported(orjson.loads(line))
        clock.t += 0.002
        if not todo:
            stop.set()

    scheduler = Scheduler(collector, write, clock=clock, sleep=sleep)
    asyncio.run(scheduler.run(stop))
    scheduler.close()
    return reported


def _pending(state_dir: Path) -> int:
    path = state_dir / STATE_FILE
    if not path.exists():
        return 0
    return sum(c for c, _ in json.loads(path.read_text()).get("pending", {}).values())


def _with_state(plan: Plan, state: Path) -> Plan:
    """``plan`` as the daemon runs it with ``--state-dir state`` (the plan carries the group's option)."""
    return dataclasses.replace(plan, group_options={"neuron_device_health": {"state_dir": str(state)}})


_OP = st.one_of(
    st.tuples(st.just("grow"), st.integers(0, 3), st.integers(0, 3), st.integers(1, 5)),
    st.tuples(st.just("reset"), st.integers(0, 3), st.integers(0, 2), st.integers(1, 3)),
    st.tuples(st.just("torn"), st.integers(0, 3), st.integers(0, 2)),
    st.tuples(st.just("mend")),
    st.tuples(st.just("reload"), st.integers(0, len(PLANS) - 1)),
    st.tuples(st.just("wait"), st.sampled_from([0.2, 0.6, 2.5, 6.0])),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=st.lists(st.tuples(st.integers(0, 3), st.lists(_OP, min_size=1, max_size=30)), min_size=1, max_size=3))
def test_reloads_watches_growth_and_restarts_count_each_event_once(
    tmp_path_factory: pytest.TempPathFactory, runs: list[tuple[int, list[tuple[Any, ...]]]]
) -> None:
    """The SIGHUP-storm property: reloads that drop, add back and keep the health group, interleaved with watch
    ticks, counter growth, resets, reads caught mid-write and daemon restarts (each run a new process's state
    from the same ``--state-dir``), then a last run with the health group: the events the reports carried plus
    those still pending in the state are the events the driver counted, exactly; never more when reads were caught
    mid-write or a counter was reset while nobody watched (the first good read after a bad one is a baseline, a
    reset seen as growth counts the growth)."""
    root = tmp_path_factory.mktemp("root")
    host = Host(root)
    clock = StepClock()
    reported = 0
    try:
        state = tmp_path_factory.mktemp("state")
        plans = [_with_state(p, state) for p in PLANS]
        for plan, ops in [*runs, (0, [])]:
            reported += _run(root, clock, plans, plan, [*ops, ("mend",), ("wait", 6.0), ("wait", 0.2)], host)
        counted = reported + _pending(state)
        if any(op[0] in ("torn", "reset") for _, ops in runs for op in ops):
            assert counted <= host.true_events
        else:
            assert counted == host.true_events
    finally:
        host.close()


# -- a state that is not ours ----------------------------------------------------------------------------------
def _group(root: Path, state: Path) -> NeuronDeviceHealth:
    """A health group whose ledger lives in ``state`` (the option the daemon's --state-dir gives it)."""
    return NeuronDeviceHealth(RootFS(root), state_dir=str(state))


@pytest.fixture
def host(tmp_path: Path) -> Iterator[tuple[Path, Host]]:
    h = Host(tmp_path / "root")
    yield tmp_path / "root", h
    h.close()


BAD_STATES = {
    "nested brackets (1.2 KB)": b"[" * 1200,
    "nested objects": b'{"a":' * 600 + b"1" + b"}" * 600,
    "negative count": json.dumps({"version": 2, "totals": {"0/hw_error": [-5, 1.0, 2.0]}}).encode(),
    "NaN time": b'{"version": 2, "totals": {"0/hw_error": [5, NaN, 2.0]}}',
    "huge count": json.dumps({"version": 2, "totals": {"0/ecc_uncorrected": [2**64, 1.0, 2.0]}}).encode(),
    "huge pending": json.dumps({"version": 2, "pending": {"0/ecc_uncorrected": [10**19, 1.0]}}).encode(),
    "raw past 16 bits": json.dumps({"version": 2, "boot_id": "", "raw": {"0": [0, 2**64 - 1, 0, 0]}}).encode(),
}


@pytest.mark.parametrize("raw", list(BAD_STATES.values()), ids=list(BAD_STATES))
def test_a_state_that_is_not_ours_is_refused_and_the_group_keeps_working(
    tmp_path: Path, host: tuple[Path, Host], raw: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    root, h = host
    state = tmp_path / "state"
    state.mkdir()
    (state / STATE_FILE).write_bytes(raw)
    with caplog.at_level(logging.WARNING, logger="neuron_monitor.health"):
        g = _group(root, state)
    assert any("fault-event state" in r.getMessage() and "not used" in r.getMessage() for r in caplog.records)
    g.prime()
    h.grow(0, 0, 2)
    body = g.collect()
    assert "not used" in body["error"]
    assert body["node"]["state"] == "unhealthy"  # the verdict still works
    counts = [
        e["count"] for d in body["neuron_devices"] for t in ("fault_events", "fault_totals") for e in d[t].values()
    ]
    assert counts and all(0 < c <= 2 for c in counts)  # nothing from the refused file, the new events once
    g.close()


# -- a failed save, then a restart ------------------------------------------------------------------------------
def _collect_events(g: NeuronDeviceHealth) -> int:
    body = g.collect()
    return sum(e["count"] for d in body["neuron_devices"] for e in d["fault_events"].values())


def _scenario(root: Path, state: Path, h: Host, break_save: Any, mend_save: Any) -> tuple[int, list[str]]:
    """5 events saved; the disk fails; 3 more while it cannot save; a restart; the disk is mended. Returns the
    events all reports carried (the true number is 8) and the errors the group reported meanwhile."""
    errors = []
    g = _group(root, state)
    g.prime()
    h.grow(0, 0, 5)
    total = _collect_events(g)
    break_save()
    h.grow(1, 1, 3)
    body = g.collect()
    total += sum(e["count"] for d in body["neuron_devices"] for e in d["fault_events"].values())
    errors.append(body.get("error", ""))
    total += _collect_events(g)
    g.close()
    g = _group(root, state)  # the restart, the disk still broken
    g.prime()
    total += _collect_events(g)
    mend_save()
    total += _collect_events(g)
    total += _collect_events(g)
    g.close()
    return total, errors


def test_a_failed_save_and_a_restart_count_each_event_once_injected(
    tmp_path: Path, host: tuple[Path, Host], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, h = host
    broken = {"on": False}
    real_replace = os.replace

    def replace(src: str, dst: str) -> None:
        if broken["on"]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_replace(src, dst)

    monkeypatch.setattr(health.os, "replace", replace)
    monkeypatch.setattr(health, "SAVE_RETRY", 0.0)
    total, errors = _scenario(
        root, tmp_path / "state", h, lambda: broken.update(on=True), lambda: broken.update(on=False)
    )
    assert total == 8
    assert "No space left on device" in errors[0] and "3 fault events held" in errors[0]


def test_a_failed_save_and_a_restart_count_each_event_once_real_files(
    tmp_path: Path, host: tuple[Path, Host], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same with a real failure of the filesystem: the temporary file's name taken by a directory (EISDIR)."""
    root, h = host
    state = tmp_path / "state"
    blocker = state / f"{STATE_FILE}.tmp{os.getpid()}"
    monkeypatch.setattr(health, "SAVE_RETRY", 0.0)
    total, errors = _scenario(root, state, h, lambda: blocker.mkdir(parents=True), blocker.rmdir)
    assert total == 8
    assert "fault-event state not saved" in errors[0] and "3 fault events held" in errors[0]


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    try:
        out = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0


def test_a_full_disk_and_a_restart_count_each_event_once(
    tmp_path: Path, host: tuple[Path, Host], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real full filesystem (a 12 KiB tmpfs filled up), where this test may mount one."""
    root, h = host
    state = tmp_path / "state"
    if not _mount_tmpfs(state, "12k"):
        pytest.skip("mounting a tmpfs is not permitted here (the injected and real-file variants still run)")
    filler = state / "filler"
    try:
        monkeypatch.setattr(health, "SAVE_RETRY", 0.0)

        def fill() -> None:
            fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                with contextlib.suppress(OSError):
                    while True:
                        os.write(fd, b"x" * 1024)
            finally:
                os.close(fd)

        total, errors = _scenario(root, state, h, fill, filler.unlink)
        assert total == 8
        assert "No space left on device" in errors[0]
    finally:
        subprocess.run(["umount", str(state)], capture_output=True, timeout=30)


# -- the storm, end to end ----------------------------------------------------------------------------------------
def test_a_sighup_storm_with_config_swaps_counts_each_event_once_end_to_end(tmp_path: Path) -> None:
    """The real daemon on a simulated host with ``--state-dir``: ECC events written while SIGHUPs arrive every few
    tens of milliseconds and the configuration swaps between one with the health group, one with another period
    and one without it. The fault events its reports carry (fresh health objects) plus those pending in the state
    are the events written, once the daemon has seen the last of them (waited for, up to 120 s)."""
    confs = [
        {"period": "1s", "system_metrics": [{"type": "neuron_device_health"}]},
        {"period": "2s", "system_metrics": [{"type": "neuron_device_health", "period": "3s"}, {"type": "vcpu_usage"}]},
        {"period": "1s", "system_metrics": [{"type": "vcpu_usage"}]},
    ]
    conf = tmp_path / "monitor.conf"
    conf.write_text(json.dumps(confs[0]))
    state = tmp_path / "state"
    out_path = tmp_path / "out.jsonl"
    rng = random.Random(7)
    with TemporarySimulator("trn1.2xlarge", runtimes=1, seed=3) as sim, open(out_path, "wb") as out:
        ecc = Path(sim.root) / "sys/devices/virtual/neuron_device/neuron0/stats/hardware/mem_ecc_uncorrected"
        daemon = subprocess.Popen(
            daemon_cmd(
                "--root", str(sim.root), "-c", str(conf), "--state-dir", str(state), "--exact-groups", "--no-imds"
            ),
            stdout=out,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait(lambda: out_path.stat().st_size > 0, "the first report")  # signals handled from here on
            value = int(ecc.read_text().strip() or 0)  # an empty state: the first run counts these too (docs)
            for _ in range(60):
                if rng.random() < 0.4:
                    value += rng.randint(1, 3)
                    fd = os.open(ecc, os.O_WRONLY)
                    try:
                        os.pwrite(fd, b"%d\n" % value, 0)
                        os.ftruncate(fd, len(b"%d\n" % value))
                    finally:
                        os.close(fd)
                else:
                    if rng.random() < 0.5:
                        conf.write_text(json.dumps(rng.choice(confs)))
                    daemon.send_signal(signal.SIGHUP)
                time.sleep(rng.uniform(0.02, 0.15))
            conf.write_text(json.dumps(confs[0]))
            daemon.send_signal(signal.SIGHUP)

            def counted() -> int:
                return _reported_in(out_path) + _pending(state)

            _wait(lambda: counted() >= value, "every event counted")
            time.sleep(1.5)  # a few more reports: nothing counted twice
            assert daemon.poll() is None, "the daemon died during the storm"
            assert counted() == value
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=30)


def _wait(check: Any, what: str, deadline: float = 120.0) -> None:
    end = time.monotonic() + deadline
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"not reached within {deadline} s: {what}")
        time.sleep(0.1)


def _reported_in(path: Path) -> int:
    total = 0
    for line in path.read_bytes().splitlines():
        try:
            report = json.loads(line)
        except ValueError:
            continue  # a line being written
        total += _reported(report)
    return total


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_a_state_dir_that_is_not_a_directory_is_exit_2_with_one_line(tmp_path: Path, how: str) -> None:
    """``--state-dir`` (or systemd's ``$STATE_DIRECTORY``) naming a file: before, it was taken as an empty state at
    every start without a word (the ledger's file could never be read or written there)."""
    path = tmp_path / "state"
    path.write_text("not a directory")
    cmd = daemon_cmd("--simulate", "trn1.2xlarge", "--once", "--no-imds")
    env = dict(os.environ)
    if how == "flag":
        cmd += ["--state-dir", str(path)]
        name = f"--state-dir {path}"
    else:
        env["STATE_DIRECTORY"] = str(path)
        name = f"STATE_DIRECTORY={path}"
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 2
    assert p.stderr == f"neuron-monitor: {name}: not a directory (the fault-event state is kept in one)\n"
    assert path.read_text() == "not a directory"
