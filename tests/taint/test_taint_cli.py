"""neuron-monitor-taint's command line: --version, bad options (exit 2, one line, no traceback), and the bearer
token never reaching its output, even when the API server refuses it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import DEADLINE, NODE, TaintProcess, api_server

CLI = [sys.executable, "-m", "neuron_monitor.taint.cli"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=DEADLINE, input="", env=env)


def test_version() -> None:
    out = run("--version")
    assert out.returncode == 0 and out.stdout.startswith("neuron-monitor-taint ")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--k8s-api", "http://127.0.0.1:9", "--node-name", ""], "--node-name (or NODE_NAME) is required"),
        (["--k8s-api", "http://127.0.0.1:9", "--node-name", "n" * 64], "not a valid label value"),
        (["--k8s-api", "off", "--node-name", NODE], "needs the API server"),
        (["--k8s-api", "http://10.0.0.1:6443", "--node-name", NODE], "plain http is allowed to a loopback"),
        (["--k8s-api", "http://127.0.0.1:9", "--node-name", NODE, "--effect", "PreferNoSchedule"], "invalid choice"),
        (["--k8s-api", "http://127.0.0.1:9", "--node-name", NODE, "--grace", "-1"], "expected 0..604800"),
        (["--k8s-api", "http://127.0.0.1:9", "--node-name", NODE, "--node-cap", "0"], "expected 1..4096"),
    ],
)
def test_a_bad_option_is_one_line_and_exit_2(args: list[str], says: str) -> None:
    env = {"PATH": "/usr/bin:/bin", "NODE_NAME": ""}
    out = run(*args, "--k8s-api-token-file", "", env=env)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert says in out.stderr and "Traceback" not in out.stderr and len(lines) <= 2  # argparse: usage + error


def test_the_token_never_reaches_the_output(tmp_path: Path) -> None:
    server = api_server()
    server.token = "s3cr3t-t0ken-value"  # the server wants this one; the process sends another
    token = tmp_path / "token"
    token.write_text("an0ther-t0ken-value-that-is-wrong\n")
    taint = TaintProcess(server, tmp_path, "--grace", "0", "--k8s-api-token-file", str(token))  # the last one wins
    try:
        taint.feed({1: "unhealthy"}, lambda: "401" in taint.stderr(), "a 401 logged")
        taint.close()
        err = taint.stderr()
        assert "an0ther-t0ken" not in err and "s3cr3t" not in err and "Bearer" not in err
    finally:
        taint.kill()
        server.stop()
