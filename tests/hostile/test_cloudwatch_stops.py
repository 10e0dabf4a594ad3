"""neuron-monitor-cloudwatch stopped while something it waits on never answers: a PutMetricData call to an endpoint
that accepts and never answers, and the credential chain waiting on an instance metadata service that never answers.

Before: SIGTERM flushed for the whole ``--flush-timeout`` and then waited 5 s more for the call in progress (a
request holds up to 25 s), so the process outlived a SIGTERM by 15 s with the defaults and by minutes with a long
``--flush-timeout`` and several requests queued; a SIGTERM while the credential chain waited stayed pending until
the chain gave up (two 600 s metadata timeouts here), then exit 2. The datums of a request abandoned at exit were
counted nowhere. After: the stop's delivery lasts at most 1 s and the first signal arms the 1.8 s watchdog, exit 0;
the abandoned request counts as ``unconfirmed``, what was never sent as ``unsent_at_exit``. Real processes and
sockets; every wait has a generous deadline and no time is asserted.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from neuron_monitor.exporters.cloudwatch.buffer import DatumBuffer
from neuron_monitor.exporters.cloudwatch.datum import Datum
from neuron_monitor.exporters.cloudwatch.publisher import Publisher, RetryPolicy
from tests.exporters.cloudwatch.conftest import aws_env, encode_lines, exporter_cmd
from tests.hostile.imds_env import waiting_on_imds

DEADLINE = 60.0  # measured from the signal; the command, before, outlived it by minutes
REPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "reports" / "wandb_trn1-2xl_reports.jsonl"


def _reports(n: int) -> bytes:
    """``n`` recent reports, 1 s apart (61 datums each: with ``--high-resolution`` no two share a minute's datum, so
    ``n`` = 200 is 13 requests of at most 1,000 datums, each held up to 25 s by a peer that never answers)."""
    lines = [orjson.loads(line) for line in REPORTS.read_bytes().splitlines() if line.strip()]
    now = time.time()
    return encode_lines([{**lines[i % len(lines)], "report_time": now - (n - i)} for i in range(n)])


def _summary(stderr: str) -> dict[str, Any]:
    line = [x for x in stderr.splitlines() if " summary " in x][-1]
    return orjson.loads(line.split(" summary ", 1)[1])  # type: ignore[no-any-return]


class SilentPeer:
    """A loopback listener that accepts every connection and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        self.accepted = threading.Event()
        self._held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._held.append(conn)
            self.accepted.set()

    def close(self) -> None:
        self.sock.close()
        for conn in self._held:
            conn.close()


def _stopped(proc: subprocess.Popen[bytes], ready: Callable[[], bool]) -> tuple[int, str]:
    """Wait until ``ready``, send SIGTERM, and return the exit status and stderr (the process must be gone within
    DEADLINE of the signal)."""
    deadline = time.monotonic() + DEADLINE
    while not ready():
        assert proc.poll() is None and time.monotonic() < deadline, proc.poll()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"still running {DEADLINE} s after SIGTERM") from None
    return proc.returncode, err.decode()


def test_sigterm_while_a_put_metric_data_call_hangs() -> None:
    peer = SilentPeer()
    data = _reports(200)
    proc = subprocess.Popen(
        exporter_cmd(
            "--endpoint-url", f"http://127.0.0.1:{peer.port}", "--high-resolution", "--flush-timeout", "3600", "-v", "2"
        ),
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=aws_env(),
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write(data)  # stdin stays open: only the signal ends it
        proc.stdin.flush()
        code, err = _stopped(proc, peer.accepted.is_set)  # a request is on its way, its answer never comes
    finally:
        proc.kill()
        proc.wait()
        peer.close()
    assert code == 0, err[-2000:]
    s = _summary(err)
    assert s["reason"] == "SIGTERM" and s["samples_sent"] == 0, s
    assert s["unconfirmed_samples"] > 0, s  # the request abandoned at exit: it may have been stored, never resent


def test_sigterm_while_the_credential_chain_waits_on_instance_metadata() -> None:
    imds = socket.socket()
    imds.bind(("127.0.0.1", 0))
    imds.listen(4)
    env = waiting_on_imds(imds.getsockname()[1], AWS_REGION="us-west-2")
    proc = subprocess.Popen(
        exporter_cmd("--endpoint-url", "http://127.0.0.1:9"), stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    held: list[socket.socket] = []
    try:
        imds.settimeout(DEADLINE)
        held.append(imds.accept()[0])  # botocore waits on the metadata service now
        code, err = _stopped(proc, lambda: True)
    finally:
        proc.kill()
        proc.wait()
        for conn in held:
            conn.close()
        imds.close()
    assert code == 0, err[-2000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("neuron-monitor-cloudwatch: SIGTERM: stopping took over"), err


class HangingClient:
    """put_metric_data: the first call waits until ``release``, then succeeds; later calls succeed at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calling = threading.Event()
        self.calls = 0

    def put_metric_data(self, Namespace: str, MetricData: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls += 1
        if self.calls == 1:
            self.calling.set()
            self.release.wait(DEADLINE)
        return {}


def test_a_call_abandoned_at_the_flush_deadline_is_counted_once() -> None:
    now = time.time()
    client = HangingClient()
    buf = DatumBuffer(log_interval=3600)
    pub = Publisher(client, "ns", buf, RetryPolicy(0.01, 0.02), log_interval=3600)
    buf.put([Datum("M", "Count", (("D", str(i)),), now, 1.0) for i in range(1500)])  # two requests: 1000 + 500
    pub.start()
    assert client.calling.wait(DEADLINE)
    pub.finish(timeout=0.1)  # the first call still hangs
    counted = pub.stats.as_dict()
    assert counted["unconfirmed_samples"] == 1000 and counted["unsent_at_exit"] == 500, counted
    assert counted["samples_sent"] == 0
    client.release.set()  # the abandoned call now succeeds: no count changes, nothing else is sent
    assert pub._thread is not None
    pub._thread.join(DEADLINE)
    assert not pub._thread.is_alive() and pub.stats.as_dict() == counted and client.calls == 1
