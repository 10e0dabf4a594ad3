"""`--root /host` as the container image and the DaemonSet use it: host /proc, /sys and /dev mounted under /host.

No container runtime is needed to check the path mapping: a directory whose proc/sys/dev entries lead to this
machine's own (as the hostPath mounts lead to the node's) must give this machine's host figures, and a directory
whose proc holds other content must give that content, which shows every read goes below the root.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

REPO = Path(__file__).resolve().parents[2]
HOST_ONLY = REPO / "configs" / "examples" / "host-only.conf"
pytestmark = pytest.mark.e2e


def one_report(root: Path) -> dict:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "neuron_monitor.daemon.cli",
            "-c",
            str(HOST_ONLY),
            "--root",
            str(root),
            "--once",
            "--no-imds",
        ],
        capture_output=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return orjson.loads(proc.stdout.splitlines()[-1])


def test_host_mounted_under_host_gives_the_hosts_figures(tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    for d in ("proc", "sys", "dev"):
        (host / d).symlink_to(f"/{d}")
    report = one_report(host)
    mem = report["system_data"]["memory_info"]
    assert mem["error"] == ""
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    assert mem["memory_total_bytes"] == int(meminfo["MemTotal"].split()[0]) * 1024
    cpus = sum(1 for line in Path("/proc/stat").read_text().splitlines() if line[:3] == "cpu" and line[3].isdigit())
    assert len(report["system_data"]["vcpu_usage"]["usage_data"]) == cpus


def test_reads_go_below_the_root_not_to_the_containers_own_proc(tmp_path: Path) -> None:
    host = tmp_path / "host"
    (host / "proc").mkdir(parents=True)
    (host / "proc" / "meminfo").write_text(
        "MemTotal:       1048576 kB\nMemFree:         524288 kB\nMemAvailable:    786432 kB\n"
        "Buffers:              0 kB\nCached:               0 kB\n"
        "SwapTotal:             0 kB\nSwapFree:              0 kB\n"
    )
    (host / "proc" / "stat").write_text(
        "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\ncpu1 50 0 50 400 0 0 0 0 0 0\nctxt 1000\n"
    )
    report = one_report(host)
    assert report["system_data"]["memory_info"]["memory_total_bytes"] == 1048576 * 1024
    assert len(report["system_data"]["vcpu_usage"]["usage_data"]) == 2
