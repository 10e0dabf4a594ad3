"""An exporter started on its own in a terminal (to try it) says that it reads report lines from stdin, at the
default verbosity, instead of waiting in silence; with a pipe it says nothing of the kind. Real processes on a real
pseudo-terminal."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest

LINE = b"reading report lines from stdin, which is a terminal: pipe neuron-monitor into this command"
ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_EC2_METADATA_DISABLED": "true"}
COMMANDS = {
    "otlp": ["neuron_monitor.exporters.otlp.cli", "--endpoint", "http://127.0.0.1:9/v1/metrics"],
    "cloudwatch": ["neuron_monitor.exporters.cloudwatch.cli", "--region", "us-west-2", "--endpoint-url",
                   "http://127.0.0.1:9"],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_terminal_on_stdin_is_named(name: str) -> None:
    pid, fd = pty.fork()
    if pid == 0:  # the child: stdin, stdout and stderr are the terminal
        os.environ.update(ENV)
        os.execv(sys.executable, [sys.executable, "-m", *COMMANDS[name]])
    out = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and LINE not in out:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    out += os.read(fd, 4096)
                except OSError:
                    break
    finally:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        os.close(fd)
    assert LINE in out, out


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_pipe_on_stdin_is_not_named(name: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", *COMMANDS[name]],
        input=b"",
        capture_output=True,
        env={**os.environ, **ENV},
        timeout=120,
    )
    assert proc.returncode == 0 and LINE not in proc.stderr, proc.stderr
