"""Signals against every long-running command: at once after it starts (issue 39.2), and mid-stream with its input
still open (issue 43.2).

Before: a SIGHUP in the daemon's first ~0.2 s (its imports) killed it with status 129 and no message, and every
other command died of SIGHUP/SIGTERM the same way while it started; ``neuron-monitor-cloudwatch`` aborted on every
stop with its input open ("Fatal Python error ... could not acquire lock for <stdin>", status 134: its reader
thread waited inside ``sys.stdin.buffer``). After: the console scripts go through ``neuron_monitor.launch``, which
blocks SIGHUP/SIGINT/SIGTERM before any of the command's modules is imported; each command installs its handlers
first thing and releases them; every command reads its input with the shared reader (``schema/stream.chunks``:
``os.read``, no lock held). neuron-monitor-top is stopped the same way in a real terminal in test_top_quit.py.
Conditions are awaited with deadlines; nothing is timed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from importlib import metadata
from pathlib import Path

import pytest

from tests.conftest import REPO

DEADLINE = 90.0
BIN = Path(sys.executable).parent
REPORT_CMD = [str(BIN / "neuron-monitor"), "--simulate", "trn1.2xlarge", "--once", "--no-imds"]
LAUNCHED = {  # console script -> launch function (every long-running command)
    "neuron-monitor": "daemon",
    "neuron-monitor-sim": "sim",
    "neuron-monitor-prometheus": "prometheus",
    "neuron-monitor-cloudwatch": "cloudwatch",
    "neuron-monitor-otlp": "otlp",
    "neuron-monitor-top": "top",
    "neuron-monitor-health": "health",
    "neuron-monitor-taint": "taint",
}
HEAVY = (  # the first of these a command imports: signals must be held by then
    "asyncio", "pydantic", "orjson", "rich", "boto3", "prometheus_client", "neuron_monitor.daemon.cli",
    "neuron_monitor.sim.cli", "neuron_monitor.exporters.prometheus.cli", "neuron_monitor.exporters.cloudwatch.cli",
    "neuron_monitor.exporters.otlp.cli", "neuron_monitor.top.cli", "neuron_monitor.health.cli",
    "neuron_monitor.taint.cli",
    "neuron_monitor.daemon.entrypoint",
)  # fmt: skip

# Runs a console script's entry point with --version; at the first import of a heavy module, records whether each
# of SIGHUP/SIGINT/SIGTERM was blocked or handled then.
PROBE = textwrap.dedent(
    """
    import signal, sys
    from importlib import metadata
    HEAVY = set(sys.argv[2].split(","))
    seen = {}

    class Probe:
        def find_spec(self, name, path=None, target=None):
            if name in HEAVY and not seen:
                blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
                for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
                    h = signal.getsignal(sig)
                    seen[sig.name] = sig in blocked or h not in (signal.SIG_DFL, signal.default_int_handler)
                seen["module"] = name
            return None

    sys.meta_path.insert(0, Probe())
    if sys.argv[1] == "entrypoint":
        sys.argv = ["neuron_monitor.launch", "entrypoint", "--version"]
        import runpy
        try:
            runpy.run_module("neuron_monitor.launch", run_name="__main__")
        except SystemExit:
            pass
    else:
        (ep,) = [e for e in metadata.entry_points(group="console_scripts") if e.name == sys.argv[1]]
        sys.argv = [sys.argv[1], "--version"]
        try:
            ep.load()()
        except SystemExit:
            pass
    print("PROBE", seen, file=sys.stderr)
    """
)


@pytest.mark.parametrize("command", [*LAUNCHED, "entrypoint"])
def test_signals_are_held_before_any_heavy_import(command: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, command, ",".join(HEAVY)], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    line = next(x for x in proc.stderr.splitlines() if x.startswith("PROBE"))
    seen = eval(line[len("PROBE ") :])  # a dict literal printed by the probe
    assert seen, f"{command}: no heavy module imported (the probe saw nothing): {proc.stderr[-1000:]}"
    held = {k: v for k, v in seen.items() if k != "module"}
    assert all(held.values()), f"{command}: at the import of {seen['module']}, not held or handled: {held}"


def test_every_long_running_command_is_launched() -> None:
    scripts = {e.name: e.value for e in metadata.entry_points(group="console_scripts")}
    for name, function in LAUNCHED.items():
        assert scripts.get(name) == f"neuron_monitor.launch:{function}", name


def _mask(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1], 16)
    return 0


def wait_holding(proc: subprocess.Popen[bytes]) -> None:
    """Until the process blocks or catches SIGHUP: its first act after the interpreter started (the interpreter
    itself catches SIGINT before, so that one cannot tell)."""
    sig = signal.SIGHUP
    bit = 1 << (sig - 1)
    deadline = time.monotonic() + DEADLINE
    while True:
        assert proc.poll() is None, f"exited with {proc.returncode} before holding {sig.name}"
        try:
            if (_mask(proc.pid, "SigBlk") | _mask(proc.pid, "SigCgt")) & bit:
                return
        except FileNotFoundError:
            pass
        assert time.monotonic() < deadline, f"never held {sig.name}"
        time.sleep(0.001)


class Command:
    """One command as a process: stdin a pipe this test keeps open (a writer attached), stderr gathered."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        env = {**os.environ, "NEURON_MONITOR_PYTHON": sys.executable}
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env
        )
        self.err: list[str] = []
        self.out: list[bytes] = []
        threading.Thread(target=self._pump_err, daemon=True).start()
        threading.Thread(target=self._pump_out, daemon=True).start()

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err.append(line.decode(errors="replace").rstrip("\n"))

    def _pump_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.out.append(line)

    def feed(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def wait_err(self, text: str) -> None:
        deadline = time.monotonic() + DEADLINE
        while not any(text in line for line in self.err):
            assert self.proc.poll() is None, f"exited {self.proc.returncode}: {self.err[-5:]}"
            assert time.monotonic() < deadline, f"no {text!r} on stderr: {self.err[-5:]}"
            time.sleep(0.02)

    def stop(self, sig: signal.Signals) -> int:
        self.proc.send_signal(sig)
        try:
            code = self.proc.wait(DEADLINE)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # only now: the input stayed open until the command ended
        time.sleep(0.05)  # the pump threads read the last bytes of the closed pipes
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def commands(tmp_path: Path) -> dict[str, list[str]]:
    return {
        "neuron-monitor": [str(BIN / "neuron-monitor"), "--simulate", "trn1.2xlarge", "--no-imds"],
        "neuron-monitor-sim": [
            str(BIN / "neuron-monitor-sim"),
            "--shape",
            "trn1.2xlarge",
            "--root",
            str(tmp_path / "s"),
        ],
        "neuron-monitor-prometheus": [str(BIN / "neuron-monitor-prometheus"), "--port", "0", "--bind", "127.0.0.1"],
        "neuron-monitor-cloudwatch": [str(BIN / "neuron-monitor-cloudwatch"), "--output", "emf", "--namespace", "t"],
        "neuron-monitor-otlp": [str(BIN / "neuron-monitor-otlp"), "--endpoint", "http://127.0.0.1:9"],
        "neuron-monitor-health": [str(BIN / "neuron-monitor-health"), "--simulate", "trn2.48xlarge"],
        "neuron-monitor-taint": [
            str(BIN / "neuron-monitor-taint"),
            "--k8s-api",
            "http://127.0.0.1:9",
            "--k8s-api-token-file",
            "",
            "--node-name",
            "node-a",
        ],
        "entrypoint": ["sh", str(REPO / "deploy/image/entrypoint.sh"), "--port", "0"],
    }


STOPS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]


@pytest.mark.parametrize("sig", STOPS)
@pytest.mark.parametrize(
    "name",
    [
        "neuron-monitor",
        "neuron-monitor-sim",
        "neuron-monitor-prometheus",
        "neuron-monitor-cloudwatch",
        "neuron-monitor-otlp",
        "neuron-monitor-health",
        "neuron-monitor-taint",
        "entrypoint",
    ],
)
def test_a_signal_at_once_after_start(tmp_path: Path, name: str, sig: signal.Signals) -> None:
    """Sent as soon as the process holds the signal, three times: a stop is a clean stop (exit 0; health says it
    was stopped and exits 2, "unknown"), a SIGHUP to the daemon or the entrypoint is a reload (still running)."""
    for _ in range(3):
        cmd = Command(commands(tmp_path)[name], REPO)
        try:
            wait_holding(cmd.proc)
            cmd.proc.send_signal(sig)
            if sig == signal.SIGHUP and name in ("neuron-monitor", "entrypoint"):
                time.sleep(0.2)  # a reload, not a stop (a hang detector would not help: it keeps running)
                assert cmd.proc.poll() is None, (cmd.proc.returncode, cmd.err[-5:])
                code = cmd.stop(signal.SIGTERM)
            else:
                code = cmd.proc.wait(DEADLINE)
        finally:
            cmd.close()
        expected = 2 if name == "neuron-monitor-health" else 0
        assert code == expected, (name, sig.name, code, cmd.err[-5:])
        assert not any("Traceback" in e or "Fatal Python error" in e for e in cmd.err), cmd.err[-10:]
        if name == "neuron-monitor-health":
            assert cmd.err[-1].startswith("neuron-monitor-health: stopped by"), cmd.err[-3:]


def _report() -> bytes:
    proc = subprocess.run(REPORT_CMD, capture_output=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-1000:]
    return proc.stdout.splitlines()[-1] + b"\n"


@pytest.fixture(scope="module")
def report() -> bytes:
    return _report()


# command -> (what it says on stderr once it reads its input, what its last stderr line holds after a stop)
MID_STREAM = {
    "neuron-monitor-prometheus": ("Running HTTP", "stopped by {sig}"),
    "neuron-monitor-cloudwatch": ("", 'summary {{"reason":"{sig}"'),
    "neuron-monitor-otlp": ("delivery failed", "summary {{"),  # it read a report and tried to send it
    "neuron-monitor-taint": ("started", 'summary {{"reason":"{sig}"'),
}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("name", list(MID_STREAM))
def test_stopped_mid_stream_with_the_input_open(tmp_path: Path, report: bytes, name: str, sig: signal.Signals) -> None:
    ready, last = MID_STREAM[name]
    cmd = Command(commands(tmp_path)[name], REPO)
    try:
        wait_holding(cmd.proc)
        cmd.feed(report)
        cmd.feed(report[: len(report) // 2])  # a writer attached, half-way through a line
        if ready:
            cmd.wait_err(ready)
        code = cmd.stop(sig)
    finally:
        cmd.close()
    assert code == 0, (code, cmd.err[-5:])
    assert not any("Fatal Python error" in e or "Traceback" in e for e in cmd.err), cmd.err[-10:]
    assert last.format(sig=sig.name) in cmd.err[-1], cmd.err[-3:]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_the_daemon_stopped_mid_stream_ends_on_a_whole_line(tmp_path: Path, sig: signal.Signals) -> None:
    conf = tmp_path / "monitor.conf"
    conf.write_text('{"period": "0.2s", "system_metrics": [{"type": "memory_info"}, {"type": "vcpu_usage"}]}')
    cmd = Command([str(BIN / "neuron-monitor"), "-c", str(conf), "--no-imds"], REPO)
    try:
        deadline = time.monotonic() + DEADLINE
        while len(cmd.out) < 2:
            assert cmd.proc.poll() is None and time.monotonic() < deadline, cmd.err[-5:]
            time.sleep(0.02)
        code = cmd.stop(sig)
    finally:
        cmd.close()
    assert code == 0, cmd.err[-5:]
    assert cmd.out[-1].endswith(b"}\n")


def test_the_daemon_tells_systemd_it_is_ready_only_once_it_handles_sighup(tmp_path: Path) -> None:
    """Type=notify: READY=1 arrives on $NOTIFY_SOCKET once SIGHUP is handled; a reload sent at once then (what
    systemd does with a `systemctl reload` queued behind the start) reloads, and SIGTERM still ends it with 0."""
    import socket

    conf = tmp_path / "monitor.conf"
    conf.write_text('{"period": "1s", "system_metrics": [{"type": "memory_info"}]}')
    where = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(where)
        sock.settimeout(DEADLINE)
        env = {**os.environ, "NOTIFY_SOCKET": where}
        proc = subprocess.Popen(
            [str(BIN / "neuron-monitor"), "-c", str(conf), "--no-imds", "--verbose", "3"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        try:
            message = sock.recv(4096).decode()
            assert "READY=1" in message.split("\n")
            assert _mask(proc.pid, "SigCgt") & (1 << (signal.SIGHUP - 1)), "ready before SIGHUP is handled"
            proc.send_signal(signal.SIGHUP)
            time.sleep(0.5)  # a reload, not a stop: it must still run (nothing to wait for)
            assert proc.poll() is None
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(DEADLINE) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.stderr is not None
        assert "SIGHUP" in proc.stderr.read().decode()  # the reload was logged
