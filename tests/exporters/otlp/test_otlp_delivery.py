"""Delivery parts on their own: backoff with full jitter, Retry-After, the outcome of each answer, the bounded
buffer (oldest reports dropped and counted, the request in flight never dropped), the total deadline of one
exchange against a server that trickles its status line, and the start-time table's bound."""

from __future__ import annotations

import email.utils
import socket
import threading
import time

from neuron_monitor.exporters.otlp.buffer import Request, RequestBuffer
from neuron_monitor.exporters.otlp.model import KEEP_ABSENT, StartTimes
from neuron_monitor.exporters.otlp.sender import RETRY_AFTER_CAP, Outcome, RetryPolicy, classify, retry_after
from neuron_monitor.exporters.otlp.transport import Answer, Endpoint, Transport


def test_backoff_is_full_jitter_under_an_exponential_ceiling() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=30.0)
    assert policy.backoff(0, lambda: 1.0) == 0.5
    assert policy.backoff(3, lambda: 1.0) == 4.0
    assert policy.backoff(20, lambda: 1.0) == 30.0
    assert policy.backoff(3, lambda: 0.25) == 1.0
    assert policy.backoff(10_000, lambda: 1.0) == 30.0  # no overflow


def test_retry_after_seconds_and_dates_capped() -> None:
    assert retry_after("7") == 7.0
    assert retry_after("100000") == RETRY_AFTER_CAP
    now = 1_800_000_000.0
    assert retry_after(email.utils.formatdate(now + 12, usegmt=True), now=now) == 12.0
    assert retry_after(email.utils.formatdate(now - 50, usegmt=True), now=now) == 0.0
    assert retry_after("soon") is None and retry_after("") is None and retry_after("-3") is None


def test_outcomes_follow_the_otlp_specification() -> None:
    assert classify(Answer(status=200))[0] is Outcome.SENT
    assert classify(Answer(status=204))[0] is Outcome.SENT
    for status in (429, 502, 503, 504):
        assert classify(Answer(status=status))[0] is Outcome.RETRY
    assert classify(Answer(error="connection refused"))[0] is Outcome.RETRY
    for status in (400, 401, 403, 404, 413, 500, 501):
        assert classify(Answer(status=status))[0] is Outcome.REJECTED
    outcome, why = classify(Answer(status=301, location="http://a/\x1b[31mb"))
    assert outcome is Outcome.REJECTED and "redirect to http://a/" in why and "\x1b" not in why


def req(report: int, size: int = 10, points: int = 5) -> Request:
    return Request(b"x" * size, points, report)


def test_buffer_drops_oldest_whole_reports_and_never_the_one_in_flight() -> None:
    buffer = RequestBuffer(max_reports=3, max_bytes=10_000)
    buffer.put([req(0), req(0)])  # a report split in two requests
    head = buffer.head(0)
    assert head is not None and head.report == 0
    buffer.put([req(1)])
    buffer.put([req(2)])
    buffer.put([req(3)])  # 4 reports: report 0 is being delivered, so report 1 goes, whole
    assert (buffer.dropped_reports, buffer.dropped_requests, buffer.dropped_points) == (1, 1, 5)
    buffer.put([req(4)])
    assert buffer.dropped_reports == 2  # report 2
    buffer.done(head)
    rest = []
    while (r := buffer.head(0)) is not None:
        rest.append(r.report)
        buffer.done(r)
    assert rest == [0, 3, 4]  # report 0's second request, then the newest
    big = RequestBuffer(max_reports=100, max_bytes=50)
    big.put([req(i, size=20) for i in range(5)])
    assert big.bytes <= 50 and big.dropped_reports == 3


def test_the_deadline_is_a_total_against_a_trickling_status_line() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    stop = threading.Event()

    def trickle() -> None:
        conn, _ = server.accept()
        conn.recv(65536)
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 1000:
            if stop.wait(0.05):
                break
            try:
                conn.send(bytes([byte]))
            except OSError:
                break
        conn.close()

    threading.Thread(target=trickle, daemon=True).start()
    transport = Transport(Endpoint.parse(f"http://127.0.0.1:{server.getsockname()[1]}/v1/metrics"), {}, timeout=0.5)
    try:
        started = time.monotonic()
        answer = transport.post(b"body", {})
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        server.close()
    assert answer.status == 0 and answer.timed_out and "no answer within 0.5 s" in answer.error
    assert elapsed < 30  # a per-read timeout alone would wait 50 s for the 1,000 bytes (generous bound)


def test_start_times_of_series_gone_for_long_are_forgotten() -> None:
    starts = StartTimes()
    for i in range(KEEP_ABSENT * 4):
        starts.next_report()
        starts.start("m", (str(i),), 1.0, (i + 1) * 10**9, 10**9)
    assert len(starts) <= KEEP_ABSENT * 2
