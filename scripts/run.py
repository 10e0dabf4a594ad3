"""`make run`: the daemon piped into the Prometheus exporter, supervised, with status lines that are true.

    python scripts/run.py --bin DIR --config FILE --bind ADDR --port N [--shape SHAPE]

- Simulates SHAPE when this host has no /dev/neuron0 (an unknown SHAPE is one line naming the known ones, before
  anything is announced or started).
- A port already in use is one line naming it, before anything starts.
- ``[run] serving URL`` only once the daemon logged its start-up line (its configuration and host are good) and
  the landing page at ``/`` answers as neuron-monitor-prometheus with the pid of the exporter started here (not
  another process on that port), then ``[run] first report in`` once ``/metrics``
  carries the daemon's first report (the Neuron hardware series).
- When either process exits, the other is stopped and this exits with its code (1 if it was 0), the last line
  naming the command and its last line on stderr (e.g. the daemon's configuration error).
- Ctrl-C (or SIGTERM) stops both and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from types import FrameType
from typing import IO

POLL_SECONDS = 0.2
STOP_SECONDS = 6.0  # the daemon removes its simulated host on the way out
PID_ROW = re.compile(r"<th>pid</th><td>(\d+)</td>")
NEURON_SERIES = re.compile(rb"^neuron_hardware_info\{", re.MULTILINE)


def say(message: str) -> None:
    print(f"[run] {message}", flush=True)


def url_host(bind: str) -> str:
    """Where to reach a server listening on ``bind`` from this host."""
    if bind == "0.0.0.0":
        return "127.0.0.1"
    if bind == "::":
        return "[::1]"
    return f"[{bind}]" if ":" in bind else bind


def port_in_use(bind: str, port: int) -> str | None:
    """Why ``bind:port`` cannot be listened on (e.g. "Address already in use"), None when it can."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the exporter binds
        try:
            s.bind((bind, port))
        except OSError as e:
            return e.strerror or str(e)
    return None


class Child:
    """A started command whose stderr is passed through line by line, the last line kept."""

    def __init__(self, name: str, proc: subprocess.Popen[bytes]) -> None:
        self.name = name
        self.proc = proc
        self.last_line = ""
        self.lines: list[str] = []  # the first lines on stderr
        assert proc.stderr is not None
        self._pump = threading.Thread(target=self._forward, args=(proc.stderr,), daemon=True)
        self._pump.start()

    def _forward(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if line.strip():
                self.last_line = line
                if len(self.lines) < 100:
                    self.lines.append(line)
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def finish(self) -> None:
        self._pump.join(2.0)


def unknown_shape(shape: str) -> str | None:
    """Why ``shape`` cannot be simulated (one line naming the known shapes), None when it can or when this
    interpreter cannot tell (the daemon then says)."""
    try:
        from neuron_monitor.sim.shapes import SHAPES
    except ImportError:
        return None
    if shape in SHAPES:
        return None
    return f"SHAPE={shape!r} is not a simulated instance type (known: {', '.join(SHAPES)})"


def fetch(url: str) -> tuple[int, bytes] | None:
    """(status, body) of a GET, None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return int(r.status), r.read(4 << 20)
    except urllib.error.HTTPError as e:
        return int(e.code), b""
    except OSError:
        return None


def ours(base: str, pid: int) -> bool:
    """The landing page answers and names the exporter started here (its pid)."""
    got = fetch(base + "/")
    if got is None or got[0] != 200:
        return False
    match = PID_ROW.search(got[1].decode("utf-8", "replace"))
    return b"neuron-monitor-prometheus" in got[1] and match is not None and int(match.group(1)) == pid


def first_report_in(base: str) -> bool:
    got = fetch(base + "/metrics")
    return got is not None and got[0] == 200 and NEURON_SERIES.search(got[1]) is not None


class Run:
    def __init__(self) -> None:
        self.stopping = False
        self.children: list[Child] = []

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True

    def start(self, daemon: list[str], exporter: list[str]) -> None:
        read_end, write_end = os.pipe()
        try:
            exp = subprocess.Popen(exporter, stdin=read_end, stderr=subprocess.PIPE)
            self.children.append(Child("neuron-monitor-prometheus", exp))
            dmn = subprocess.Popen(daemon, stdout=write_end, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
            self.children.insert(0, Child("neuron-monitor", dmn))
        finally:
            os.close(read_end)
            os.close(write_end)

    def daemon_started(self) -> bool:
        """The daemon logged its start-up line: its configuration and host (or simulator) are good."""
        return any(line.startswith("neuron-monitor: INFO: started ") for line in self.children[0].lines)

    def exited(self) -> Child | None:
        return next((c for c in self.children if c.proc.poll() is not None), None)

    def wait_until(self, check: Callable[[], bool]) -> Child | None:
        """Poll ``check`` until it holds (None), a child exits (that child) or a stop is asked (None)."""
        while not self.stopping:
            gone = self.exited()
            if gone is not None:
                return gone
            if check():
                return None
            time.sleep(POLL_SECONDS)
        return None

    def stop_all(self) -> None:
        for c in self.children:
            if c.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    c.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        while any(c.proc.poll() is None for c in self.children) and time.monotonic() < deadline:
            time.sleep(0.05)
        for c in self.children:
            if c.proc.poll() is None:
                c.proc.kill()
            c.proc.wait()
            c.finish()

    def failed(self, child: Child) -> int:
        self.stop_all()
        code = child.proc.returncode
        why = f": {child.last_line}" if child.last_line else ""
        say(f"stopped: {child.name} exited with code {code}{why}")
        return code if code and code > 0 else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="make run")
    p.add_argument("--bin", required=True, help="directory of the installed commands (the virtualenv's bin)")
    p.add_argument("--config", required=True)
    p.add_argument("--bind", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--shape", default="trn1.32xlarge")
    args = p.parse_args(argv)
    why = port_in_use(args.bind, args.port)
    if why is not None:
        say(f"port {args.port} on {args.bind} is not free ({why}): PORT=... to choose another")
        return 1
    daemon = [os.path.join(args.bin, "neuron-monitor"), "-c", args.config, "--verbose", "info"]
    if not os.path.exists("/dev/neuron0"):
        bad = unknown_shape(args.shape)
        if bad is not None:
            say(f"stopped: {bad}")
            return 2
        say(f"no Neuron device here: simulating a {args.shape} (SHAPE=... to change)")
        daemon += ["--simulate", args.shape]
    exporter = [os.path.join(args.bin, "neuron-monitor-prometheus"), "--bind", args.bind, "--port", str(args.port)]
    exporter += ["--verbose", "info"]
    say(f"neuron-monitor {' '.join(daemon[1:])} | neuron-monitor-prometheus {' '.join(exporter[1:])}")
    run = Run()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, run.on_signal)
    began = time.monotonic()
    run.start(daemon, exporter)
    exporter_pid = run.children[1].proc.pid
    base = f"http://{url_host(args.bind)}:{args.port}"
    gone = run.wait_until(lambda: run.daemon_started() and ours(base, exporter_pid))
    if gone is not None:
        return run.failed(gone)
    if not run.stopping:
        say(f"serving {base}/metrics, landing page {base}/ (listening on {args.bind}; Ctrl-C stops)")
        gone = run.wait_until(lambda: first_report_in(base))
        if gone is not None:
            return run.failed(gone)
    if not run.stopping:
        say(f"first report in after {time.monotonic() - began:.1f} s: Neuron series are served on {base}/metrics")
        gone = run.wait_until(lambda: False)
        if gone is not None:
            return run.failed(gone)
    run.stop_all()
    say("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
