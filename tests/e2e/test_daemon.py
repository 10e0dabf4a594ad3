"""The neuron-monitor CLI as a real subprocess: reports, periods, values vs /proc, signals, pipes, slow readers."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from neuron_monitor.groups.neuron_runtime_vcpu_usage.collector import CLOCK_TICKS
from neuron_monitor.host.procfs import parse_meminfo, parse_stat
from tests.conftest import REPO, daemon_cmd
from tests.e2e.daemon_process import DaemonProcess
from tests.host.fake_imds import FakeImds

pytestmark = pytest.mark.e2e

HOST_ONLY_1S = {"period": "1s", "system_metrics": [{"type": "vcpu_usage"}, {"type": "memory_info"}]}


def write_conf(path: Path, conf: dict) -> Path:
    path.write_text(json.dumps(conf))
    return path


def _cumulative_periods_never_early(periods: list[float], period: float) -> None:
    """The daemon collects on a fixed grid and never early: the k-th collection (0-based) happens at least
    (k + 1) periods after start-up, so the measured periods add up to at least that, however late a loaded host
    wakes it (a late collection makes the next period short, never the sum)."""
    total = 0.0
    for k, p in enumerate(periods):
        assert p > 0
        total += p
        assert total >= (k + 1) * period - 0.01, (k, periods)


def test_one_second_config_against_live_proc(tmp_path: Path) -> None:
    conf = write_conf(tmp_path / "m.conf", HOST_ONLY_1S)
    before = parse_stat(Path("/proc/stat").read_bytes())
    with DaemonProcess("-c", str(conf), "--no-imds") as d:
        reports = d.reports(3)
        assert d.stop() == 0
    after = parse_stat(Path("/proc/stat").read_bytes())
    steal_ticks = max(after.total[7] - before.total[7], 0)  # steal while the daemon ran
    meminfo = parse_meminfo(Path("/proc/meminfo").read_bytes())
    for r in reports:
        assert list(r)[:4] == ["neuron_runtime_data", "system_data", "instance_info", "neuron_hardware_info"]
        assert r["neuron_runtime_data"] == []
        vcpu, mem = r["system_data"]["vcpu_usage"], r["system_data"]["memory_info"]
        assert vcpu["fresh"] and mem["fresh"]
        assert vcpu["period"] > 0 and mem["period"] > 0
        assert len(vcpu["usage_data"]) == len(after.cpu_ids)
        # AWS prints no steal field: the shares sum to 100 minus the steal share of the period. The period's
        # clock ticks are about cpus * CLK_TCK * period (half that, to stay a true bound); its steal ticks are at
        # most those of the whole run.
        window_ticks = 0.5 * len(after.cpu_ids) * CLOCK_TICKS * vcpu["period"]
        steal_share_max = min(100.0, 100.0 * steal_ticks / window_ticks)
        assert 100.0 - steal_share_max - 0.05 <= sum(vcpu["average_usage"].values()) <= 100.05
        assert vcpu["context_switch_count"] > 0
        assert mem["memory_total_bytes"] == meminfo["MemTotal"]
        assert r["neuron_hardware_info"]["error"].startswith("no Neuron devices found")
        assert r["neuron_hardware_info"]["neuron_device_count"] == 0
        assert r["neuron_monitor"]["collection_seconds"] >= 0
    _cumulative_periods_never_early([r["system_data"]["vcpu_usage"]["period"] for r in reports], 1.0)
    times = [r["report_time"] for r in reports]
    assert all(a < b for a, b in itertools.pairwise(times))
    skipped = [r["neuron_monitor"]["skipped_collections"] for r in reports]
    assert skipped == sorted(skipped) and skipped[0] >= 0  # a loaded host may skip slots; the count never goes back


def test_mixed_periods_fresh_and_carried(tmp_path: Path) -> None:
    """vcpu_usage every 300 ms, memory_info every 900 ms: memory is carried (same body, ``fresh`` false) in the
    reports between its collections. Reports are read until a carried one was seen (a loaded host that wakes the
    daemon late may collect both every time for a while)."""
    conf = write_conf(
        tmp_path / "m.conf",
        {"system_metrics": [{"type": "vcpu_usage", "period": "300ms"}, {"type": "memory_info", "period": "900ms"}]},
    )
    reports: list[dict] = []
    deadline = time.monotonic() + 60
    with DaemonProcess("-c", str(conf), "--no-imds") as d:
        while len(reports) < 7 or not any(
            not r["system_data"].get("memory_info", {"fresh": True})["fresh"] for r in reports
        ):
            assert time.monotonic() < deadline, "no report carried memory_info in 60 s"
            reports.append(d.report())
    assert all(r["system_data"]["vcpu_usage"]["fresh"] for r in reports)
    mems = [r["system_data"]["memory_info"] for r in reports if "memory_info" in r["system_data"]]
    assert mems[0]["fresh"]  # present from its first collection on, fresh then
    for prev, cur in itertools.pairwise(mems):
        if not cur["fresh"]:
            assert cur == prev | {"fresh": False}  # carried: the previous body as it was
    _cumulative_periods_never_early([m["period"] for m in mems if m["fresh"]], 0.9)
    _cumulative_periods_never_early([r["system_data"]["vcpu_usage"]["period"] for r in reports], 0.3)


def test_192_cpu_root(fake_root_192: Path, tmp_path: Path) -> None:
    conf = write_conf(tmp_path / "m.conf", HOST_ONLY_1S | {"period": "200ms"})
    with DaemonProcess("-c", str(conf), "--root", str(fake_root_192), "--no-imds") as d:
        r = d.reports(2)[-1]
    assert len(r["system_data"]["vcpu_usage"]["usage_data"]) == 192
    assert r["system_data"]["memory_info"]["memory_total_bytes"] == 2113929216 * 1024


def test_once_writes_one_report_and_exits(tmp_path: Path) -> None:
    conf = write_conf(tmp_path / "m.conf", HOST_ONLY_1S)
    proc = subprocess.run(daemon_cmd("-c", str(conf), "--once", "--no-imds"), cwd=REPO, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(b"\n")  # the resync newline: a torn line before us cannot swallow this report
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1
    assert json.loads(lines[0])["system_data"]["vcpu_usage"]["error"] == ""


def test_sigterm_finishes_the_line_and_exits_0(tmp_path: Path) -> None:
    conf = write_conf(tmp_path / "m.conf", HOST_ONLY_1S | {"period": "50ms"})
    d = DaemonProcess("-c", str(conf), "--no-imds", read=False)
    assert d.proc.stdout is not None
    first = [d.proc.stdout.readline() for _ in range(5)]  # running and writing (however slow its start-up was)
    assert all(line.endswith(b"\n") for line in first)
    d.proc.send_signal(signal.SIGTERM)
    out, err = d.proc.communicate(timeout=20)
    assert d.proc.returncode == 0, err
    assert out == b"" or out.endswith(b"\n")
    assert all(json.loads(line) for line in first + out.splitlines() if line.strip())  # (the resync newline)


def test_sighup_reload_and_bad_reload_keeps_old(tmp_path: Path) -> None:
    conf = write_conf(tmp_path / "m.conf", {"system_metrics": [{"type": "memory_info", "period": "200ms"}]})
    with DaemonProcess("-c", str(conf), "--no-imds", "--verbose", "2") as d:
        assert set(d.report()["system_data"]) == {"memory_info"}
        write_conf(conf, {"system_metrics": [{"type": "vcpu_usage", "period": "200ms"}]})
        d.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 60
        report = d.report()
        while set(report["system_data"]) != {"vcpu_usage"}:
            assert time.monotonic() < deadline
            report = d.report()
        assert report["system_data"]["vcpu_usage"]["error"] == ""  # primed on reload: data from the first report
        conf.write_text('{"system_metrics": [{"type": "nope"}]}')
        d.proc.send_signal(signal.SIGHUP)
        reports = d.reports(8)
        assert all(set(r["system_data"]) == {"vcpu_usage"} for r in reports[-3:])
        assert d.stop() == 0
        err = d.stderr()
    assert "SIGHUP: configuration reloaded" in err
    assert "keeping the previous configuration" in err and 'unknown metric group "nope"' in err


def test_config_file_change_reloads_without_signal(tmp_path: Path) -> None:
    conf = write_conf(tmp_path / "m.conf", {"system_metrics": [{"type": "memory_info", "period": "200ms"}]})
    with DaemonProcess("-c", str(conf), "--no-imds") as d:
        d.report()
        write_conf(conf, {"system_metrics": [{"type": "vcpu_usage", "period": "200ms"}]})
        deadline = time.monotonic() + 60
        while set(d.report()["system_data"]) != {"vcpu_usage"}:
            assert time.monotonic() < deadline


def test_broken_pipe_exits_with_one_clear_line(tmp_path: Path) -> None:
    conf = write_conf(tmp_path / "m.conf", HOST_ONLY_1S | {"period": "50ms"})
    d = DaemonProcess("-c", str(conf), "--no-imds", read=False)
    assert d.proc.stdout is not None
    d.proc.stdout.readline()
    d.proc.stdout.close()  # the reader goes away
    d.proc.wait(timeout=20)
    err = d.proc.stderr.read().decode() if d.proc.stderr else ""
    assert d.proc.returncode == 1
    assert err.splitlines() == ["neuron-monitor: stdout was closed by its reader (broken pipe); exiting"]


def _bump_ctxt(stat: Path, delta: int) -> None:
    lines = stat.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("ctxt "):
            lines[i] = f"ctxt {int(line.split()[1]) + delta}"
    data = ("\n".join(lines) + "\n").encode()
    with open(stat, "r+b") as f:  # in place, as the kernel presents it
        f.write(data)
        f.truncate()


def test_slow_reader_loses_no_counts_and_buffers_nothing(fake_root_192: Path, tmp_path: Path) -> None:
    """A reader that takes 0.4 s per line while the daemon collects every 50 ms: every context switch arrives."""
    conf = write_conf(tmp_path / "m.conf", {"system_metrics": [{"type": "vcpu_usage", "period": "50ms"}]})
    stat = fake_root_192 / "proc" / "stat"
    d = DaemonProcess("-c", str(conf), "--root", str(fake_root_192), "--no-imds", read=False)
    assert d.proc.stdout is not None
    bumped = 0
    try:
        assert d.proc.stdout.readline() == b"\n"  # the resync newline
        reports = [json.loads(d.proc.stdout.readline())]  # the baseline is taken before the first report
        for _ in range(8):
            _bump_ctxt(stat, 1000)
            bumped += 1000
            time.sleep(0.4)  # slow reader: the pipe fills (each 192-CPU line is ~20 KB) and the daemon waits
            reports.append(json.loads(d.proc.stdout.readline()))
        # stop producing events, then drain until the daemon has collected after the last bump
        for _ in range(60):
            reports.append(json.loads(d.proc.stdout.readline()))
        rss_kib = int(
            next(
                ln for ln in Path(f"/proc/{d.proc.pid}/status").read_text().splitlines() if ln.startswith("VmRSS")
            ).split()[1]
        )
    finally:
        d.stop()
    total = sum(r["system_data"]["vcpu_usage"]["context_switch_count"] for r in reports)
    assert total == bumped
    # the daemon says so itself: skipped slots are visible in the report, not only on stderr
    assert reports[-1]["neuron_monitor"]["skipped_collections"] > 0
    assert reports[-1]["neuron_monitor"]["reports"] == len(reports) - 1
    assert max(r["system_data"]["vcpu_usage"]["period"] for r in reports) > 0.2  # gaps widen the period
    assert rss_kib < 200 * 1024  # bounded: one line in flight, not a growing queue


def test_instance_info_from_local_imds(tmp_path: Path) -> None:
    conf = write_conf(tmp_path / "m.conf", {"period": "300ms", "system_metrics": [{"type": "memory_info"}]})
    with FakeImds("v2") as imds, DaemonProcess("-c", str(conf), "--imds-endpoint", imds.endpoint) as d:
        deadline = time.monotonic() + 60
        info = d.report()["instance_info"]
        while info["error"]:
            assert time.monotonic() < deadline
            info = d.report()["instance_info"]
    assert info["instance_id"] == "i-0123456789abcdef0"
    assert info["subnet_id"] == "subnet-0abc1234"
    assert info["instance_name"] == "trainer-17"


def test_off_ec2_starts_at_once_and_fills_error(tmp_path: Path) -> None:
    conf = write_conf(tmp_path / "m.conf", {"period": "200ms", "system_metrics": [{"type": "memory_info"}]})
    with DaemonProcess("-c", str(conf), "--imds-endpoint", "http://127.0.0.1:9", "--imds-timeout", "0.5") as d:
        reports = d.reports(6)
    assert reports[0]["system_data"]["memory_info"]["error"] == ""
    assert reports[-1]["instance_info"]["error"]
    assert reports[-1]["instance_info"]["instance_id"] == ""
