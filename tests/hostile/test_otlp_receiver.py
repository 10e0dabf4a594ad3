"""neuron-monitor-otlp against hostile receivers (real processes, a real HTTP server): slow, 429 with Retry-After,
503s for a long while then recovery (nothing lost, in order, short backoff options instead of a minute of wall
time), a 500 (not retried, counted), garbage and huge answers, a redirect, a TLS certificate it cannot verify, a
receiver that never answers (total deadline; SIGTERM ends the process), a receiver that is down (bounded buffer,
oldest dropped and counted). Conditions are awaited with generous deadlines; nothing asserts on wall time."""

from __future__ import annotations

import signal
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.exporters.otlp.otlp_helpers import trn2
from tests.exporters.otlp.receiver import Receiver, Reply, free_port
from tests.exporters.prometheus.prom_process import make_certificate

DEADLINE = 120.0
FAST = ["--retry-base-delay", "0.01", "--retry-max-delay", "0.05"]


def lines(n: int, runtimes: int = 2) -> bytes:
    return b"".join(orjson.dumps(trn2(i, runtimes=runtimes)) + b"\n" for i in range(n))


def run(url: str, data: bytes, *args: str) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run(
        [sys.executable, "-m", "neuron_monitor.exporters.otlp.cli", "--endpoint", url, *FAST, *args],
        input=data,
        capture_output=True,
        timeout=DEADLINE,
    )
    return proc.returncode, summary(proc.stderr.decode()), proc.stderr.decode()


def summary(stderr: str) -> dict[str, Any]:
    for line in stderr.splitlines():
        if " summary " in line:
            return orjson.loads(line.split(" summary ", 1)[1])  # type: ignore[no-any-return]
    raise AssertionError(f"no summary in {stderr!r}")


CLOSING = 1  # at end of input, one last push of the exporter's own metrics (neuron_exporter_up 0)


def report_times(receiver: Receiver) -> list[int]:
    """The time of each report delivered (the closing push of the exporter's own metrics left out)."""
    return [
        r.resource_metrics[0].scope_metrics[0].metrics[0].gauge.data_points[0].time_unix_nano
        for r in receiver.accepted()
        if not r.resource_metrics[0].scope_metrics[0].metrics[0].name.startswith("neuron_exporter_")
    ]


def test_503s_for_a_long_while_then_recovery_loses_nothing_and_keeps_order() -> None:
    receiver = Receiver(lambda n: Reply(503) if n < 40 else Reply())
    try:
        code, s, err = run(receiver.url, lines(10))
        assert code == 0
        assert s["requests_sent"] == 10 + CLOSING and s["retries"] >= 40 and s["dropped_points"] == 0
        # the failures' warning has its end in the log too (one line, whatever the order of retries)
        assert err.count("delivery failed (HTTP 503)") == 1 and err.count("delivering again after 40 failed") == 1
        assert s["points_sent"] == s["points"]
        times = report_times(receiver)
        assert times == sorted(times) and len(set(times)) == 10
    finally:
        receiver.stop()


def test_429_with_retry_after_is_honoured() -> None:
    receiver = Receiver(lambda n: Reply(429, {"Retry-After": "1"}) if n == 0 else Reply())
    try:
        code, s, err = run(receiver.url, lines(2), "-v", "2")
        assert code == 0 and s["requests_sent"] == 2 + CLOSING and s["retries"] == 1
        assert "HTTP 429" in err and "retrying in 1.0 s" in err
    finally:
        receiver.stop()


def test_500_is_not_retried_dropped_and_counted_with_its_message() -> None:
    bad = Reply(500, {"Content-Type": "text/plain"}, b"ingester \x1b[2J exploded")
    receiver = Receiver(lambda n: bad if n == 0 else Reply())
    try:
        code, s, err = run(receiver.url, lines(3))
        assert code == 0 and s["requests_sent"] == 2 + CLOSING and s["rejected_points"] > 0 and s["retries"] == 0
        assert "HTTP 500: ingester" in err and "\x1b" not in err
    finally:
        receiver.stop()


@pytest.mark.parametrize(
    "reply",
    [
        Reply(200, {"Content-Type": "application/x-protobuf"}, b"\xff\xff\xff\xff garbage"),
        Reply(200, {"Content-Type": "application/json"}, b"[1, 2"),
        Reply(200, {"Content-Type": "application/x-protobuf"}, b"\x00" * (8 * 1024 * 1024)),
    ],
    ids=["garbage-protobuf", "garbage-json", "huge"],
)
def test_garbage_and_huge_answers_count_as_delivered_and_are_reported(reply: Reply) -> None:
    receiver = Receiver(lambda n: reply)
    try:
        code, s, err = run(receiver.url, lines(2))
        assert code == 0 and s["requests_sent"] == 2 + CLOSING
        assert "could not read the receiver's answer" in err
    finally:
        receiver.stop()


def test_partial_success_is_counted_and_logged() -> None:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse

    answer = ExportMetricsServiceResponse()
    answer.partial_success.rejected_data_points = 7
    answer.partial_success.error_message = "out of order sample"
    receiver = Receiver(lambda n: Reply(200, {}, answer.SerializeToString()))
    try:
        code, s, err = run(receiver.url, lines(3))
        assert code == 0 and s["partial_rejected_points"] == 7 * (3 + CLOSING)
        assert err.count("rejected 7 data points") == 1 and "out of order sample" in err  # once a minute
    finally:
        receiver.stop()


def test_a_redirect_is_not_followed_and_named() -> None:
    receiver = Receiver(lambda n: Reply(307, {"Location": "http://127.0.0.2:9/elsewhere"}))
    try:
        code, s, err = run(receiver.url, lines(2))
        assert code == 0 and s["requests_sent"] == 0 and s["rejected_points"] > 0
        assert "redirect to http://127.0.0.2:9/elsewhere not followed" in err
        assert receiver.count() == 2 + CLOSING
    finally:
        receiver.stop()


def test_a_certificate_it_cannot_verify_is_a_clear_error_and_nothing_is_sent(tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    receiver = Receiver(tls=context)
    try:
        code, s, err = run(receiver.url, lines(1), "--flush-timeout", "2")
        assert code == 0 and s["requests_sent"] == 0 and s["unsent_points"] > 0
        assert "TLS certificate not accepted" in err
        # with its CA the same receiver is reached
        code, s, _ = run(receiver.url, lines(1), "--certificate", str(cert))
        assert code == 0 and s["requests_sent"] == 1 + CLOSING
    finally:
        receiver.stop()


def test_a_receiver_that_never_answers_meets_the_deadline_and_sigterm_ends_the_process() -> None:
    receiver = Receiver(lambda n: Reply(hang=True))
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuron_monitor.exporters.otlp.cli", "--endpoint", receiver.url, "--timeout", "0.5",
         *FAST, "-v", "2"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.write(lines(2))
        proc.stdin.flush()
        receiver.wait_for(lambda: receiver.count() >= 3, DEADLINE)  # each exchange was cut at its deadline
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(DEADLINE) == 0
        err = proc.stderr.read().decode()
        s = summary(err)
        assert s["reason"] == "SIGTERM" and s["requests_sent"] == 0 and s["unsent_points"] > 0
        assert "no answer within 0.5 s" in err
    finally:
        proc.kill()
        proc.wait()
        receiver.stop()


def test_a_slow_receiver_within_the_deadline_gets_everything() -> None:
    receiver = Receiver(lambda n: Reply(delay=0.3, trickle=0.01))
    try:
        code, s, _ = run(receiver.url, lines(3), "--timeout", "60")
        assert code == 0 and s["requests_sent"] == 3 + CLOSING and s["retries"] == 0
    finally:
        receiver.stop()


def test_a_receiver_that_is_down_bounds_the_buffer_and_counts_what_it_drops() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1/metrics"  # nothing listens
    code, s, err = run(url, lines(60), "--buffer-seconds", "5", "--flush-timeout", "0")
    assert code == 0
    assert s["reports"] == 60 and s["requests_sent"] == 0
    assert s["dropped_reports"] >= 60 - 6  # 5 s of 1 s reports are kept (and the one being retried)
    assert s["dropped_points"] + s["unsent_points"] == s["points"]
    assert "connection refused" in err and "buffer full" in err


def test_a_long_outage_holds_at_most_the_buffer_bytes() -> None:
    """Reports keep coming while the receiver is down for good: the queue never holds more than --buffer-bytes (one
    request's worth aside, the one being retried), whatever the number of reports; the rest is dropped, counted."""
    url = f"http://127.0.0.1:{free_port()}/v1/metrics"  # nothing listens
    data = lines(150, runtimes=16)
    code, s, _ = run(url, data, "--buffer-bytes", str(1024 * 1024), "--buffer-seconds", "100000",
                     "--compression", "none", "--flush-timeout", "0")  # fmt: skip
    assert code == 0 and s["reports"] == 150 and s["requests_sent"] == 0
    assert s["dropped_reports"] > 100  # about 300 KB per uncompressed report: three fit
    assert s["buffer_peak_bytes"] <= 1024 * 1024 + 400 * 1024
    assert s["dropped_points"] + s["unsent_points"] == s["points"]


def test_sigterm_while_idle_ends_the_process() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuron_monitor.exporters.otlp.cli", "--endpoint", "http://127.0.0.1:9/v1/metrics",
         "-v", "3"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        assert b"started" in proc.stderr.readline()  # running, waiting for input
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(DEADLINE) == 0
        assert '"reason":"SIGTERM"' in proc.stderr.read().decode()
    finally:
        proc.kill()
        proc.wait()


def test_sigterm_while_start_up_waits_on_the_credential_chain_ends_the_process() -> None:
    """--sigv4 looks for credentials, which may wait on the instance metadata service: a SIGTERM then ends the
    process at once (here the metadata service accepts and never answers, with a 600 s timeout)."""
    import socket

    from tests.hostile.imds_env import waiting_on_imds

    imds = socket.socket()
    imds.bind(("127.0.0.1", 0))
    imds.listen(4)
    env = waiting_on_imds(imds.getsockname()[1])
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuron_monitor.exporters.otlp.cli", "--endpoint", "http://127.0.0.1:9/v1/metrics",
         "--sigv4", "us-west-2"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )  # fmt: skip
    try:
        imds.settimeout(DEADLINE)
        conn, _ = imds.accept()  # botocore is waiting on the metadata service now
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(DEADLINE) == 0
        conn.close()
    finally:
        proc.kill()
        proc.wait()
        imds.close()
