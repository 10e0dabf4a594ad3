"""Numbers from files and headers are taken only in their plain form: no sign, space, "_" or exponent slips in.

Before (issue 32): power/utilization "1_0" was read as 10.0 (so min > max could follow); a second Content-Length
that differed from the first was accepted (the first won) where RFC 9112 section 6.3 requires 400.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from neuron_monitor.exporters.prometheus.server import HTTPFront, Request, Response, ServerLimits, parse_head, plain
from neuron_monitor.neuron.telemetry_files import parse_power

GOOD = "POWER_STATUS_VALID,1789180860,{},40.00,20.25\n"


@pytest.mark.parametrize(
    "field",
    ["1_0", "+10", "-1", " 10", "10 ", "1e1", "nan", "inf", "0x10", "10.", ".5", "١٠", "10.1234567", "1000"],
)
def test_a_power_percentage_in_any_other_form_is_refused(field: str) -> None:
    with pytest.raises(ValueError):
        parse_power(GOOD.format(field).encode())


@pytest.mark.parametrize("epoch", ["1_789_180_860", "+1789180860", "-1", " 1789180860", "1.5", "0x6aa"])
def test_a_power_epoch_in_any_other_form_is_refused(epoch: str) -> None:
    with pytest.raises(ValueError):
        parse_power(f"POWER_STATUS_VALID,{epoch},1.00,40.00,20.25\n".encode())


@pytest.mark.parametrize("field", ["10", "10.5", "0.00", "100.00", "99.999999"])
def test_plain_percentages_are_read(field: str) -> None:
    assert parse_power(GOOD.format(field).encode()).min_percent == float(field)


def head(*headers: str) -> bytes:
    return "\r\n".join(["GET /metrics HTTP/1.1", *headers]).encode()


@pytest.mark.parametrize(
    "headers",
    [
        ("Content-Length: 0", "Content-Length: 5"),
        ("Content-Length: 5", "content-length: 0"),
        ("Content-Length: 0, 5",),
        ("Content-Length: -1",),
        ("Content-Length: +5",),
        ("Content-Length: 1_0",),
        ("Content-Length: ",),
        ("Content-Length: 0x10",),
        ("Content-Length: ５",),
        ("Host: a", "Host: b"),
        ("Host: a", "Host: a"),
    ],
)
def test_conflicting_or_malformed_framing_headers_are_400(headers: tuple[str, ...]) -> None:
    parsed = parse_head(head(*headers))
    assert isinstance(parsed, Response) and parsed.status == 400


@pytest.mark.parametrize(
    ("headers", "length"),
    [(("Content-Length: 5", "Content-Length: 5"), "5"), (("Content-Length: 5, 5",), "5"), (("Host: a",), None)],
)
def test_repeated_equal_content_lengths_are_one(headers: tuple[str, ...], length: str | None) -> None:
    parsed = parse_head(head(*headers))
    assert isinstance(parsed, Request) and parsed.headers.get("content-length") == length


@pytest.fixture
def front() -> Iterator[HTTPFront]:
    f = HTTPFront(("127.0.0.1", 0), lambda request: plain(200, "ok"), limits=ServerLimits())
    f.start()
    yield f
    f.stop()


def test_a_live_front_answers_400_and_closes(front: HTTPFront) -> None:
    port = front.server_address[1]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 7\r\n\r\nGET / HTTP/1.1\r\n\r\n")
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    assert got.startswith(b"HTTP/1.1 400 ")
    assert got.count(b"HTTP/1.1") == 1  # the pipelined request after it was not served: the connection closed
