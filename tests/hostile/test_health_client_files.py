"""``neuron-monitor-health --url``'s client files are read the hostile way: a FIFO named as the password file, the
CA or the client key never blocks the command (exit 2 at once, one line), and a password file of a gigabyte is
refused by its cap, not read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

URL = "https://127.0.0.1:9"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "neuron_monitor.health.cli", "--url", URL, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("option", ["--password-file", "--ca-file", "--key-file"])
def test_a_fifo_never_blocks(tmp_path: Path, option: str) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "plain").write_text("x")
    args = {
        "--password-file": ["--user", "u", "--password-file", str(fifo)],
        "--ca-file": ["--ca-file", str(fifo)],
        "--key-file": ["--cert-file", str(tmp_path / "plain"), "--key-file", str(fifo)],
    }[option]
    done = _run(*args)  # the 60 s timeout is the hang this guards against
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"neuron-monitor-health: {option} {str(fifo)!r}: is a FIFO, not a regular file"]


def test_a_huge_password_file_is_refused_by_its_cap(tmp_path: Path) -> None:
    big = tmp_path / "password"
    with big.open("wb") as f:
        f.truncate(1 << 30)  # sparse: a gigabyte of zeros that costs no disk
    done = _run("--user", "u", "--password-file", str(big))
    assert done.returncode == 2
    assert "larger than the 4096-byte limit" in done.stderr and len(done.stderr.splitlines()) == 1
