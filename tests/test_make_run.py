"""`make run` tells the truth (scripts/run.py, which the Makefile's run target calls): a failing daemon or exporter
ends it with that command's code and error line, a port in use is one line naming the port, "serving" is printed
only once our own exporter answers, then "first report in" once Neuron series are served; Ctrl-C exits 0."""

from __future__ import annotations

import http.server
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

BIN = Path(sys.executable).parent
RUN = REPO / "scripts" / "run.py"
DEADLINE = 90.0

sys.path.insert(0, str(REPO / "scripts"))
import run as make_run  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_cmd(config: Path | str, port: int, *more: str) -> list[str]:
    return [sys.executable, str(RUN), "--bin", str(BIN), "--config", str(config), "--bind", "127.0.0.1",
            "--port", str(port), *more]  # fmt: skip


def test_make_run_calls_the_script() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert "scripts/run.py --bin $(VENV)/bin --config $(CONFIG) --bind $(BIND) --port $(PORT) --shape '$(SHAPE)'" in (
        makefile
    )


def test_a_bad_configuration_ends_it_with_the_daemons_error(tmp_path: Path) -> None:
    conf = tmp_path / "typo.conf"
    conf.write_text('{"perod": "1s"}')
    got = subprocess.run(run_cmd(conf, free_port(), "--shape", "trn1.2xlarge"), capture_output=True, text=True,
                         timeout=DEADLINE, cwd=REPO)  # fmt: skip
    assert got.returncode == 2
    assert "[run] serving" not in got.stdout
    last = got.stdout.strip().splitlines()[-1]
    assert last.startswith("[run] stopped: neuron-monitor exited with code 2: neuron-monitor: ")
    assert "perod: unknown key" in last and 'did you mean "period"?' in last


@pytest.mark.parametrize("shape", ["trn9", ""], ids=["trn9", "empty"])
def test_an_unknown_shape_is_one_line_before_anything_is_announced(shape: str) -> None:
    """`make run SHAPE=trn9` (or `SHAPE=`) names the known shapes and starts nothing; no "simulating a trn9"."""
    got = subprocess.run(run_cmd(REPO / "configs" / "monitor.conf", free_port(), "--shape", shape),
                         capture_output=True, text=True, timeout=DEADLINE, cwd=REPO)  # fmt: skip
    if os.path.exists("/dev/neuron0"):
        pytest.skip("a real Neuron device: nothing is simulated")
    assert got.returncode == 2
    assert got.stderr == ""
    assert got.stdout.splitlines() == [
        f"[run] stopped: SHAPE={shape!r} is not a simulated instance type (known: inf1.xlarge, "
        + got.stdout.split("(known: inf1.xlarge, ", 1)[1].rstrip("\n")
    ]
    assert "trn1.32xlarge, " in got.stdout and "trn2.48xlarge" in got.stdout


def test_a_port_in_use_is_one_line_naming_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        got = subprocess.run(run_cmd(REPO / "configs" / "monitor.conf", port), capture_output=True, text=True,
                             timeout=DEADLINE, cwd=REPO)  # fmt: skip
    assert got.returncode == 1
    assert got.stderr == ""
    assert got.stdout.splitlines() == [
        f"[run] port {port} on 127.0.0.1 is not free (Address already in use): PORT=... to choose another"
    ]


class _Landing(http.server.BaseHTTPRequestHandler):
    pid = 0

    def do_GET(self) -> None:
        body = f"<h1>neuron-monitor-prometheus</h1><tr><th>pid</th><td>{self.pid}</td></tr>".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def landing() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Landing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_serving_means_our_exporter_answers(landing: str) -> None:
    _Landing.pid = 4242
    assert make_run.ours(landing, 4242)
    assert not make_run.ours(landing, 4243)  # another exporter (another pid) on the port
    assert not make_run.ours(f"http://127.0.0.1:{free_port()}", 4242)  # nothing listening


@pytest.mark.e2e
def test_serving_then_first_report_then_ctrl_c(tmp_path: Path) -> None:
    conf = tmp_path / "monitor.conf"
    conf.write_text('{"period": "1s"}')
    env = {**os.environ, "NEURON_MONITOR_SIM_DIR": str(tmp_path)}
    proc = subprocess.Popen(run_cmd(conf, free_port(), "--shape", "trn1.2xlarge"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO, env=env, start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        seen: list[str] = []
        deadline = time.monotonic() + DEADLINE
        while not any("first report in" in line for line in seen):
            line = proc.stdout.readline()
            assert line and time.monotonic() < deadline, (seen, proc.poll())
            seen.append(line.rstrip("\n"))
        serving = next(i for i, line in enumerate(seen) if line.startswith("[run] serving http://127.0.0.1:"))
        assert serving < len(seen) - 1
        assert "landing page http://127.0.0.1:" in seen[serving]
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole group
        assert proc.wait(DEADLINE) == 0
        assert proc.stdout.read().strip().splitlines()[-1] == "[run] stopped"
        assert not [p for p in tmp_path.iterdir() if p.name.startswith("neuron-sim-")]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def readme_sample() -> list[str]:
    """The lines of the README's "What `make run` prints" block."""
    text = (REPO / "README.md").read_text().split("What `make run` prints", 1)[1]
    return text.split("```", 2)[1].strip("\n").splitlines()


def sample_pattern(line: str, port: int) -> re.Pattern[str]:
    """A README sample line as a pattern: `...` stands for anything, a figure in seconds (`0.6 s`) for any figure,
    and the default port 8000 for the port of the run; everything else (the group count included) is literal."""
    parts = []
    for piece in re.split(r"(\.\.\.|\d+\.\d+ s\b|:8000\b|port 8000\b)", line.replace(":8000", f":{port}")):
        if piece == "...":
            parts.append(".*")
        elif re.fullmatch(r"\d+\.\d+ s", piece):
            parts.append(r"\d+(\.\d+)? s")
        else:
            parts.append(re.escape(piece))
    return re.compile("".join(parts))


def source(line: str) -> str:
    """Which process wrote a line (each keeps its own order; their lines interleave freely)."""
    return line.split(":", 1)[0].split(" ", 1)[0]


@pytest.mark.e2e
def test_the_readme_sample_is_what_make_run_prints(tmp_path: Path) -> None:
    """`make run` as the README shows it (configs/monitor.conf, the default shape): each README line is printed, in
    the README's order among the lines of the same process, and every `[run]` line printed up to `first report in`
    is in the README."""
    if os.path.exists("/dev/neuron0"):
        pytest.skip("a real Neuron device: nothing is simulated")
    port = free_port()
    proc = subprocess.Popen(run_cmd("configs/monitor.conf", port, "--shape", "trn1.32xlarge"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
                            start_new_session=True)  # fmt: skip
    seen: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + DEADLINE
        while not any(line.startswith("[run] first report in") for line in seen):
            line = proc.stdout.readline()
            assert line and time.monotonic() < deadline, (seen, proc.poll())
            seen.append(line.rstrip("\n"))
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(DEADLINE) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    sample = readme_sample()
    patterns = [sample_pattern(line, port) for line in sample]
    for name in {source(line) for line in sample}:
        printed = [line for line in seen if source(line) == name]
        at = 0
        for line, pattern in zip(sample, patterns, strict=True):
            if source(line) != name:
                continue
            while at < len(printed) and not pattern.fullmatch(printed[at]):
                at += 1
            assert at < len(printed), f"README line not printed (in order): {line!r}\nprinted: {printed}"
            at += 1
    for line in seen:
        if line.startswith("[run]"):
            assert any(p.fullmatch(line) for p in patterns), f"printed but not in the README: {line!r}"
