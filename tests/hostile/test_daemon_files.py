"""Hostile files against the daemon: special files as the configuration, strict JSON, bounded error lines, and
symlinks, FIFOs and /dev/zero planted under ``--root``.

Before (issue 20, 2026-11-22): a FIFO as ``-c`` blocked forever; ``/dev/zero`` read 3.8 GB then exited 1 with a
MemoryError traceback; duplicate keys were last-wins; full-width digits passed as periods; an error line echoed a
200 KB input; ``<root>/sys/class/dmi/id/product_name -> /etc/hosts`` put /etc/hosts into ``instance_type``.
After: each is exit 2 with one bounded line, or (under ``--root``) an error in the report, and never a wait.
Every run has a generous deadline (a hang fails the test instead of stalling the suite); no timing is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 60.0
HOST_ONLY = {"period": "1s", "system_metrics": [{"type": "memory_info"}, {"type": "vcpu_usage"}]}


def _daemon(*args: str, timeout: float = DEADLINE) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "neuron_monitor.daemon.cli", "--no-imds", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=timeout, check=False)


def _one_line_exit_2(done: subprocess.CompletedProcess[str], needle: str) -> str:
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert needle in lines[0], lines[0]
    assert len(lines[0]) <= 500
    return lines[0]


def test_fifo_as_config_exits_2_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "monitor.conf"
    os.mkfifo(fifo)
    _one_line_exit_2(_daemon("-c", str(fifo), "--once"), "is a FIFO")


def test_dev_zero_as_config_exits_2_without_reading_it() -> None:
    _one_line_exit_2(_daemon("-c", "/dev/zero", "--once"), "is a character device")


def test_oversize_config_exits_2(tmp_path: Path) -> None:
    conf = tmp_path / "big.conf"
    conf.write_bytes(b" " * (2 * 1024 * 1024) + b"{}")
    _one_line_exit_2(_daemon("-c", str(conf), "--once"), "limit")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"period": "1s", "period": "10ms"}', "duplicate key 'period'"),
        ('{"neuron_runtimes": [{"tag_filter": "a", "tag_filter": "b"}]}', "duplicate key 'tag_filter'"),
        ('{"period": "\uff11s"}', "ASCII digits"),  # full-width 1
        ('{"period": "\u0661s"}', "ASCII digits"),  # Arabic-Indic 1
        ("[" * 100_000 + "]" * 100_000, "invalid JSON"),
        ('{"system_metrics": [' * 3000 + "]}" * 3000, "invalid JSON"),
    ],
)
def test_strict_json(tmp_path: Path, text: str, needle: str) -> None:
    conf = tmp_path / "monitor.conf"
    conf.write_text(text, encoding="utf-8")
    _one_line_exit_2(_daemon("-c", str(conf), "--once"), needle)


@pytest.mark.parametrize(
    "config",
    [
        {"period": "x" * 200_000},
        {"period": 7, "y" * 200_000: 1},
        {"k" * 200_000: 1},
        {"neuron_runtimes": [{"tag_filter": "(" * 200_000}]},
    ],
)
def test_error_line_never_echoes_the_whole_input(tmp_path: Path, config: dict[str, object]) -> None:
    conf = tmp_path / "monitor.conf"
    conf.write_text(json.dumps(config))
    line = _one_line_exit_2(_daemon("-c", str(conf), "--once"), str(conf))
    assert len(line) <= 500


def _host_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "proc").mkdir(parents=True)
    (root / "proc" / "meminfo").write_text("MemTotal: 1048576 kB\nMemFree: 524288 kB\nMemAvailable: 786432 kB\n")
    (root / "proc" / "stat").write_text("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 100 0 100 800 0 0 0 0 0 0\nctxt 1000\n")
    (root / "sys" / "class" / "dmi" / "id").mkdir(parents=True)
    return root


def _report(root: Path, tmp_path: Path) -> dict[str, object]:
    conf = tmp_path / "host.conf"
    conf.write_text(json.dumps(HOST_ONLY))
    done = _daemon("-c", str(conf), "--root", str(root), "--once")
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return orjson.loads(lines[-1])  # type: ignore[no-any-return]


def test_absolute_symlink_out_of_root_is_resolved_inside_it(tmp_path: Path) -> None:
    root = _host_root(tmp_path)
    (root / "sys" / "class" / "dmi" / "id" / "product_name").symlink_to("/etc/hostname")
    (root / "etc").mkdir()
    (root / "etc" / "hostname").write_text("trn1.inside-root\n")
    report = _report(root, tmp_path)
    assert report["instance_info"]["instance_type"] == "trn1.inside-root"  # type: ignore[index]


def test_relative_symlink_climbing_out_of_root_stops_at_it(tmp_path: Path) -> None:
    root = _host_root(tmp_path)
    outside = tmp_path / "secret"
    outside.write_text("trn1.leaked\n")
    depth = "../" * 12
    (root / "sys" / "class" / "dmi" / "id" / "product_name").symlink_to(f"{depth}secret")
    report = _report(root, tmp_path)
    assert "leaked" not in json.dumps(report)


def test_proc_meminfo_linked_to_dev_zero_is_an_error_not_a_flood(tmp_path: Path) -> None:
    root = _host_root(tmp_path)
    (root / "proc" / "meminfo").unlink()
    (root / "proc" / "meminfo").symlink_to("/dev/zero")
    report = _report(root, tmp_path)
    assert report["system_data"]["memory_info"]["error"]  # type: ignore[index]
    assert report["system_data"]["vcpu_usage"]["error"] == ""  # type: ignore[index]


def test_fifo_under_root_is_an_error_not_a_hang(tmp_path: Path) -> None:
    root = _host_root(tmp_path)
    (root / "proc" / "meminfo").unlink()
    os.mkfifo(root / "proc" / "meminfo")
    os.mkfifo(root / "sys" / "class" / "dmi" / "id" / "product_name")
    report = _report(root, tmp_path)
    assert "regular file" in report["system_data"]["memory_info"]["error"]  # type: ignore[index]


RUNTIME_CPU_ONLY = {
    "period": "1s",
    "neuron_runtimes": [{"tag_filter": ".*", "metrics": [{"type": "neuron_runtime_vcpu_usage"}]}],
}


@pytest.mark.parametrize("planted", ["fifo", "/dev/zero"])
def test_a_runtimes_procfs_uptime_that_is_a_fifo_or_dev_zero_is_an_error_not_a_hang(
    tmp_path: Path, planted: str
) -> None:
    """A root whose ``proc/<pid>`` is a directory (a capture, a copied tree) gives the runtime's first-sight uptime
    from ``<root>/proc/uptime``. Before, that file was read with a plain unbounded read, not through the root: a FIFO
    there hung the runtime groups for good (no report ever came; ``--once`` never returned) and a link to /dev/zero
    read until a MemoryError. Now it is read as every file is, and the reports go on."""
    from neuron_monitor.sim.temporary import TemporarySimulator

    conf = tmp_path / "runtime.conf"
    conf.write_text(json.dumps(RUNTIME_CPU_ONLY))
    with TemporarySimulator("trn1.2xlarge", runtimes=1, seed=3) as sim:
        pid = _own_proc_dir(sim.root, planted)
        daemon = subprocess.Popen(
            [sys.executable, "-m", "neuron_monitor.daemon.cli", "--no-imds", "--root", str(sim.root), "-c", str(conf)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO,
        )
        try:
            bodies = _runtime_bodies(daemon, int(pid), 2)
        finally:
            daemon.kill()
            daemon.wait()
    assert all(b["error"] == "" and b["period"] > 0 for b in bodies), bodies


def _own_proc_dir(root: Path, planted: str) -> str:
    """Turn the simulator's ``<root>/proc/<pid>`` link (to /proc/<pid>) of its runtime into a directory of the root
    with a copy of its stat, and plant ``planted`` (a FIFO, a directory or a link target) as ``<root>/proc/uptime``;
    the pid."""
    proc = root / "proc"
    deadline = time.monotonic() + DEADLINE
    while not (pids := [p for p in os.listdir(proc) if p.isdigit()]):
        assert time.monotonic() < deadline, "the simulated runtime never started"
        time.sleep(0.05)
    pid = pids[0]
    (proc / pid).unlink()
    (proc / pid).mkdir()
    (proc / pid / "stat").write_bytes(Path(f"/proc/{pid}/stat").read_bytes())
    (proc / "uptime").unlink()
    if planted == "fifo":
        os.mkfifo(proc / "uptime")
    elif planted == "directory":
        (proc / "uptime").mkdir()
    else:
        (proc / "uptime").symlink_to(planted)
    return pid


def test_a_first_sight_without_a_readable_uptime_names_it() -> None:
    """The first body of a runtime is measured against its procfs's uptime: when that cannot be read (here a
    directory) the body says why instead of passing zeros for a measurement (before: error "", period 0)."""
    from neuron_monitor.groups.neuron_runtime_vcpu_usage.collector import NeuronRuntimeVcpuUsage
    from neuron_monitor.host.rootfs import RootFS
    from neuron_monitor.neuron.app import App
    from neuron_monitor.sim.temporary import TemporarySimulator

    with TemporarySimulator("trn1.2xlarge", runtimes=1, seed=3) as sim:
        pid = int(_own_proc_dir(sim.root, "directory"))
        group = NeuronRuntimeVcpuUsage(RootFS(sim.root))
        try:
            first = group.collect([App(pid, "t")], [])[pid]
        finally:
            group.close()
    assert "proc/uptime" in first["error"] and "regular file" in first["error"], first


def _runtime_bodies(daemon: subprocess.Popen[bytes], pid: int, n: int) -> list[dict[str, Any]]:
    """The first ``n`` neuron_runtime_vcpu_usage bodies of ``pid`` in the daemon's reports (within DEADLINE)."""
    assert daemon.stdout is not None
    got: list[dict[str, Any]] = []
    timer = threading.Timer(DEADLINE, daemon.kill)  # a daemon that hangs ends the read with EOF
    timer.start()
    try:
        for line in daemon.stdout:
            if not line.strip():
                continue
            for runtime in orjson.loads(line).get("neuron_runtime_data", []):
                if runtime["pid"] == pid:
                    got.append(runtime["report"]["neuron_runtime_vcpu_usage"])
            if len(got) >= n:
                return got
    finally:
        timer.cancel()
    raise AssertionError(f"{len(got)} of {n} reports of pid {pid} within {DEADLINE} s")


def test_fallback_resolution_without_openat2_stays_in_root(tmp_path: Path) -> None:
    """The component walk used on kernels without openat2 resolves as RESOLVE_IN_ROOT does."""
    from neuron_monitor.host.rootfs import resolve_in_root

    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "sys" / "id").mkdir(parents=True)
    (root / "sys" / "id" / "abs").symlink_to("/etc/hosts")
    (root / "sys" / "id" / "up").symlink_to("../../../../../../secret")
    (root / "sys" / "id" / "loop").symlink_to("loop")
    assert resolve_in_root(str(root), "sys/id/abs") == str(root / "etc" / "hosts")
    assert resolve_in_root(str(root), "sys/id/up") == str(root / "secret")
    assert resolve_in_root(str(root), "/../../etc/x") == str(root / "etc" / "x")
    with pytest.raises(OSError):
        resolve_in_root(str(root), "sys/id/loop")


def test_a_link_the_root_cannot_follow_keeps_its_own_error(tmp_path: Path) -> None:
    """A host-absolute link in the root's ``sys`` that lands inside the root by the host's path (not by the root's)
    is the confined open's "missing file", not "resolves outside --root"; a link to the host's other trees is."""
    import errno

    from neuron_monitor.host.rootfs import RootFS

    root = tmp_path / "root"
    (root / "sys").mkdir(parents=True)
    (root / "sys" / "real").write_text("x\n")
    (root / "sys" / "hostpath").symlink_to(root / "sys" / "real")
    (root / "sys" / "etc").symlink_to("/etc/hostname")
    fs = RootFS(root)
    with pytest.raises(OSError) as missing:
        fs.open_regular("sys/hostpath")
    assert missing.value.errno == errno.ENOENT
    if Path("/etc/hostname").is_file():
        with pytest.raises(OSError) as outside:
            fs.open_regular("sys/etc")
        assert outside.value.errno == errno.EXDEV
