"""Record real report streams: the daemon on a simulated host of each shape, a few reports each, in parallel.

The fleet replays these lines (``nodes``), so every node serves what our daemon really writes for its shape,
including groups added later, without running a simulator and a daemon per node. The simulated workloads have the
low error rates of a healthy fleet (``HEALTHY``: the simulator's defaults are meant to show every error type), a
recording skips the first reports (runtimes still loading their models) and keeps lines in which every runtime
executes on every core it holds, so a healthy replayed node raises no alert by accident.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from neuron_monitor.sim.temporary import TemporarySimulator

REPO = Path(__file__).resolve().parents[2]
# per-execution error probabilities of a healthy fleet (the simulator's defaults: 0.002, 0.0005, 0.0002, 0.0005)
HEALTHY = {"generic_error_rate": 0.0005, "numerical_error_rate": 0.0001, "timeout_rate": 0.0,
           "failed_to_queue_rate": 0.0001, "hardware_error_rate": 0.0}  # fmt: skip


@dataclass(frozen=True)
class ShapeRun:
    """One shape to record: the instance type (the simulator's default logical NeuronCore config) and its runtimes."""

    shape: str
    runtimes: int


def monitor_config(period: float) -> dict[str, object]:
    """The default configuration (configs/monitor.conf: every group a node runs by default) at ``period`` seconds."""
    config: dict[str, object] = json.loads((REPO / "configs" / "monitor.conf").read_text())
    config["period"] = f"{period:g}s"
    return config


def busy_everywhere(report: dict[str, object]) -> bool:
    """True when every runtime reports neuroncore_counters with a non-zero utilization on each of its cores."""
    runtimes = report.get("neuron_runtime_data")
    if not isinstance(runtimes, list) or not runtimes:
        return False
    for entry in runtimes:
        body = entry.get("report", {}).get("neuroncore_counters", {}) if isinstance(entry, dict) else {}
        cores = body.get("neuroncores_in_use") if isinstance(body, dict) else None
        if not isinstance(cores, dict) or not cores:
            return False
        if any(not isinstance(c, dict) or not c.get("neuroncore_utilization") for c in cores.values()):
            return False
    return True


class _Daemon:
    """The daemon reading a simulated host of ``run``'s shape, writing reports to a pipe."""

    def __init__(self, run: ShapeRun, config: Path, seed: int) -> None:
        self.sim = TemporarySimulator(run.shape, runtimes=run.runtimes, seed=seed, **HEALTHY)
        self.sim.start(timeout=300.0)  # many large hosts built side by side on a busy machine take a while
        cmd = [
            sys.executable,
            "-m",
            "neuron_monitor.daemon.cli",
            "--root",
            str(self.sim.root),
            "-c",
            str(config),
            "--no-imds",
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.run = run
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        assert self.proc.stdout is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.buffer = b""
        self.kept: list[bytes] = []
        self.seen = 0

    def feed(self, data: bytes, skip: int) -> None:
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            self.seen += 1
            if self.seen <= skip:
                continue
            if busy_everywhere(orjson.loads(line)):
                self.kept.append(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(Exception):  # the simulator's own SIGTERM, while the daemon ends
            if self.sim._proc is not None and self.sim._proc.poll() is None:
                self.sim._proc.send_signal(signal.SIGTERM)
        if self.proc.poll() is None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        with contextlib.suppress(Exception):
            self.sim.close()


def record(runs: list[ShapeRun], reports: int, period: float = 1.0, skip: int = 1, timeout: float = 120.0,
           seed: int = 1) -> dict[ShapeRun, list[bytes]]:  # fmt: skip
    """``reports`` report lines per shape, recorded at once from one daemon per shape (raises RuntimeError when a
    shape gives too few usable lines within ``timeout`` seconds). The simulators start side by side."""
    with tempfile.TemporaryDirectory(prefix="fleet-record-") as tmp:
        config = Path(tmp) / "monitor.conf"
        config.write_text(json.dumps(monitor_config(period)))
        daemons: list[_Daemon] = []
        with concurrent.futures.ThreadPoolExecutor(max(1, len(runs))) as pool:
            started = [pool.submit(_Daemon, run, config, seed + i) for i, run in enumerate(runs)]
            failure: BaseException | None = None
            for future in started:
                try:
                    daemons.append(future.result())
                except BaseException as e:  # stop the others, then raise the first failure
                    failure = failure or e
        if failure is not None:
            for d in daemons:
                d.stop()
            raise failure
        sel = selectors.DefaultSelector()
        for d in daemons:
            assert d.proc.stdout is not None
            sel.register(d.proc.stdout, selectors.EVENT_READ, d)
        deadline = time.monotonic() + timeout
        try:
            while any(len(d.kept) < reports for d in daemons):
                if time.monotonic() > deadline:
                    short = {d.run.shape: len(d.kept) for d in daemons if len(d.kept) < reports}
                    raise RuntimeError(f"too few usable reports within {timeout:.0f} s: {short}")
                for key, _ in sel.select(1.0):
                    d = key.data
                    data = os.read(key.fd, 1 << 20)
                    if not data:
                        sel.unregister(key.fileobj)
                        if len(d.kept) < reports:
                            raise RuntimeError(f"the daemon for {d.run.shape} exited ({d.proc.poll()})")
                        continue
                    if len(d.kept) < reports:
                        d.feed(data, skip)
        finally:
            sel.close()
            for d in daemons:  # SIGTERM to all first, so they end side by side
                with contextlib.suppress(OSError):
                    d.proc.send_signal(signal.SIGTERM)
            for d in daemons:
                d.stop()
        return {d.run: d.kept[:reports] for d in daemons}
