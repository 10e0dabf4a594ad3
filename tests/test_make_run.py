"""`make run` tells the truth (scripts/run.py, which the Makefile's run target calls): a failing daemon or exporter
ends it with that command's code and error line, a port in use is one line naming the port, "serving" is printed
only once our own exporter answers, then "first report in" once Neuron series are served; Ctrl-C exits 0."""

from __future__ import annotations

import http.server
import os
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
    assert "scripts/run.py --bin $(VENV)/bin --config $(CONFIG) --bind $(BIND) --port $(PORT) --shape $(SHAPE)" in (
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


def test_an_unknown_shape_ends_it_with_the_daemons_error(tmp_path: Path) -> None:
    got = subprocess.run(run_cmd(REPO / "configs" / "monitor.conf", free_port(), "--shape", "trn9"),
                         capture_output=True, text=True, timeout=DEADLINE, cwd=REPO)  # fmt: skip
    if os.path.exists("/dev/neuron0"):
        pytest.skip("a real Neuron device: nothing is simulated")
    assert got.returncode == 2
    last = got.stdout.strip().splitlines()[-1]
    assert last.startswith("[run] stopped: neuron-monitor exited with code 2: neuron-monitor: --simulate: ")


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
