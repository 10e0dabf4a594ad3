"""Hostile EFA counter files: garbage, huge, a FIFO, negative, past 64 bits, empty, a symlink out of the root.
Each fills the group's ``error`` for that counter; the other counters and adapters carry on, nothing blocks, and
the daemon (a real process under ``--root``) reports every report on time. No timing is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from neuron_monitor.groups.efa_counters.collector import EfaCounters
from neuron_monitor.host.rootfs import RootFS
from tests.groups.efa_tree import add_adapter, set_counter, switch

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 60.0

CASES = [
    (b"garbage\n", "expected an unsigned 64-bit decimal"),
    (b"-5\n", "expected an unsigned 64-bit decimal"),
    (b"18446744073709551616\n", "18446744073709551616 is past 64 bits"),
    (b"99999999999999999999999999\n", "expected an unsigned 64-bit decimal"),
    (b"", "expected an unsigned 64-bit decimal"),
    (b"1_000\n", "expected an unsigned 64-bit decimal"),
    (b" 12\n", "expected an unsigned 64-bit decimal"),
    (b"7" * 5000 + b"\n", "expected an unsigned 64-bit decimal"),
]


def _port(body: dict, device: str) -> dict:
    return next(p for p in body["efa_ports"] if p["efa_device"] == device)


@pytest.mark.parametrize(("content", "needle"), CASES)
def test_bad_counter_is_that_counters_error(tmp_path: Path, content: bytes, needle: str) -> None:
    port = add_adapter(tmp_path, "rdmap0s0", switch(0, 0))
    other = add_adapter(tmp_path, "rdmap8s0", switch(1, 0))
    g = EfaCounters(RootFS(tmp_path))
    g.prime()
    set_counter(port, "rx_bytes", content)
    set_counter(other, "rx_bytes", 1849105264112 + 42)
    body = g.collect()
    assert f"rx_bytes of rdmap0s0 port 1: {needle}" in body["error"]
    assert len(body["error"]) < 2000  # the bytes are quoted cut short
    assert "rx_bytes" not in _port(body, "rdmap0s0")["counters"]
    assert _port(body, "rdmap0s0")["counters"]["tx_bytes"] == 0
    assert _port(body, "rdmap8s0")["counters"]["rx_bytes"] == 42  # the other adapter carries on
    set_counter(port, "rx_bytes", 1849105264112 + 9)
    assert _port(g.collect(), "rdmap0s0")["counters"]["rx_bytes"] == 0  # the good value again: a new baseline
    set_counter(port, "rx_bytes", 1849105264112 + 20)
    assert _port(g.collect(), "rdmap0s0")["counters"]["rx_bytes"] == 11


def test_huge_fifo_and_escaping_link_are_refused(tmp_path: Path) -> None:
    port = add_adapter(tmp_path, "rdmap0s0", switch(0, 0))
    add_adapter(tmp_path, "rdmap8s0", switch(1, 0))
    (port / "hw_counters/tx_bytes").write_bytes(b"1" * (17 * 1024 * 1024))  # past the 16 MiB cap of any read
    (port / "hw_counters/rx_bytes").unlink()
    os.mkfifo(port / "hw_counters/rx_bytes")  # would block a plain open() forever
    (port / "hw_counters/tx_pkts").unlink()
    (port / "hw_counters/tx_pkts").symlink_to("/etc/hostname")  # resolves inside the root: missing there
    g = EfaCounters(RootFS(tmp_path))
    g.prime()
    body = g.collect()
    error = body["error"]
    assert "rx_bytes of rdmap0s0 port 1: " in error and "regular file" in error
    assert "tx_bytes of rdmap0s0 port 1: " in error
    assert "tx_pkts of rdmap0s0 port 1: " in error
    assert _port(body, "rdmap8s0")["counters"]["tx_bytes"] == 0
    assert "rx_pkts" in _port(body, "rdmap0s0")["counters"]


def test_daemon_carries_on_with_hostile_counter_files(tmp_path: Path) -> None:
    port = add_adapter(tmp_path, "rdmap0s0", switch(0, 0))
    add_adapter(tmp_path, "rdmap8s0", switch(1, 0))
    (port / "hw_counters/rx_bytes").unlink()
    os.mkfifo(port / "hw_counters/rx_bytes")
    set_counter(port, "tx_bytes", b"-1\n")
    conf = tmp_path / "monitor.conf"
    conf.write_text('{"period": "1s", "system_metrics": [{"type": "efa_counters"}, {"type": "memory_info"}]}')
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/meminfo").write_text("MemTotal: 1000 kB\nMemFree: 500 kB\nMemAvailable: 500 kB\n")
    cmd = [sys.executable, "-m", "neuron_monitor.daemon.cli", "--no-imds", "--root", str(tmp_path), "-c", str(conf)]
    cmd += ["--once"]
    done = subprocess.run(cmd, capture_output=True, cwd=REPO, timeout=DEADLINE, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = orjson.loads(done.stdout.strip().splitlines()[-1])
    efa = report["system_data"]["efa_counters"]
    assert "rx_bytes of rdmap0s0 port 1:" in efa["error"] and "tx_bytes of rdmap0s0 port 1:" in efa["error"]
    assert {p["efa_device"] for p in efa["efa_ports"]} == {"rdmap0s0", "rdmap8s0"}
    assert report["system_data"]["memory_info"]["error"] == ""
