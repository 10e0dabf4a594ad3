"""A script run in a child process until it ends: the hostile tests that hook a command's real ``main``
(test_exporter_signals, test_startup_stops). Its stdin stays open (no end of input) until it ends."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

DEADLINE = 60.0  # generous: nothing is timed, only that the child ends


def start(script: str, stdout: int | None = None) -> subprocess.Popen[str]:
    """``python -c script`` from the repository, stdin an open pipe, stderr kept."""
    return subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=stdout, stderr=subprocess.PIPE, cwd=REPO,
        text=True,
    )  # fmt: skip


def wait_until_it_ends(proc: subprocess.Popen[str], what: str) -> tuple[int, str]:
    """Waits up to ``DEADLINE`` for ``proc`` to end, else kills it and fails naming ``what``; (status, stderr)."""
    try:
        proc.wait(DEADLINE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        assert proc.stderr is not None
        pytest.fail(f"{what} did not stop within {DEADLINE} s of SIGTERM; stderr: {proc.stderr.read()[-2000:]}")
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
    assert proc.stderr is not None
    return proc.returncode, proc.stderr.read()
