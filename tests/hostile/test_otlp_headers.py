"""neuron-monitor-otlp with the header and endpoint mistakes of a first day (real processes, a real HTTP server).

- A receiver that echoes the token it refused, without its ``Bearer`` word, or with the token where the exporter
  shortens the receiver's message: the token (or a piece of it) is in no stderr line at ``-v 4``, summary included.
- A header value with a line break (percent-encoded in ``OTEL_EXPORTER_OTLP_HEADERS``), a control character or a
  typographic dash pasted with a token: exit 2 with one line naming the header, never the value (before, every
  request failed in Python's client and was retried for ever, the log line showing the whole value).
- An endpoint with a space, a control or a non-ASCII character inside: exit 2 with one line (before, every request
  failed and was retried for ever as "not an HTTP answer").
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.exporters.otlp.otlp_helpers import trn2
from tests.exporters.otlp.receiver import Receiver, Reply

DEADLINE = 120.0
FAST = ["--retry-base-delay", "0.01", "--retry-max-delay", "0.05", "--flush-timeout", "5"]
TOKEN = "s3cr3t-t0ken-0123456789abcdef"


def lines(n: int) -> bytes:
    return b"".join(orjson.dumps(trn2(i, runtimes=1)) + b"\n" for i in range(n))


def run(args: list[str], env: dict[str, str] | None = None, data: bytes = b"") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neuron_monitor.exporters.otlp.cli", *FAST, *args],
        input=data.decode(),
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    "body",
    [
        f"invalid token {TOKEN}".encode(),
        ("x" * 280 + " token " + TOKEN).encode(),  # the token across the point where the message is shortened
    ],
    ids=["echoed-without-scheme", "echoed-at-the-cut"],
)
def test_a_token_the_receiver_echoes_reaches_no_log_line(body: bytes) -> None:
    receiver = Receiver(lambda n: Reply(401, {"Content-Type": "text/plain"}, body))
    try:
        proc = run(["--endpoint", receiver.url, "--header", f"Authorization=Bearer {TOKEN}", "-v", "4"], data=lines(2))
    finally:
        receiver.stop()
    assert proc.returncode == 0
    assert "HTTP 401" in proc.stderr and "[REDACTED]" in proc.stderr
    assert TOKEN[:8] not in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        ([], {"OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%0A{TOKEN}"}, "OTEL_EXPORTER_OTLP_HEADERS"),
        ([], {"OTEL_EXPORTER_OTLP_METRICS_HEADERS": f"X-Api-Key={TOKEN}%00"}, "OTEL_EXPORTER_OTLP_METRICS_HEADERS"),
        (["--header", f"Authorization=Bearer {TOKEN}\x1b"], {}, "--header"),
        (["--header", f"Authorization=Bearer {TOKEN}\u2010x"], {}, "--header"),
    ],
    ids=["env-line-break", "env-nul", "option-escape", "option-typographic-dash"],
)
def test_a_header_value_that_cannot_be_sent_is_exit_2_and_never_shown(
    args: list[str], env: dict[str, str], named: str
) -> None:
    receiver = Receiver()
    try:
        proc = run(["--endpoint", receiver.url, "-v", "4", *args], env=env, data=lines(1))
        assert receiver.count() == 0
    finally:
        receiver.stop()
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and named in err and "Traceback" not in err
    assert TOKEN[:8] not in err


@pytest.mark.parametrize(
    "endpoint",
    ["http://127.0.0.1:4318/v1/metr ics", "http://127.0.0.1:4318/v1/metrics\x7f", "http://127.0.0.1:4318/v1/métriques"],
    ids=["space", "control", "non-ascii"],
)
def test_an_endpoint_that_cannot_be_sent_is_exit_2(endpoint: str) -> None:
    proc = run(["--endpoint", endpoint], data=lines(1))
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "percent-encode" in err and "Traceback" not in err


def test_an_endpoint_with_spaces_around_it_is_used_trimmed() -> None:
    receiver = Receiver()
    try:
        proc = run(["--endpoint", f"  {receiver.url} "], data=lines(1))
        assert proc.returncode == 0 and receiver.count() >= 1, proc.stderr
    finally:
        receiver.stop()


def test_header_values_http_can_carry() -> None:
    from neuron_monitor.exporters.otlp.settings import (
        SettingsError,
        header_option,
        header_value_problem,
        parse_headers,
    )

    assert header_value_problem("Bearer abc.DEF-_~+/=\tcafé") == ""
    assert header_value_problem("a\nb") == "has a line break"
    assert "U+0085" in header_value_problem("a\x85b")
    assert "U+201C" in header_value_problem("\u201ctoken\u201d")
    with pytest.raises(SettingsError, match="Authorization has a line break"):
        parse_headers("Authorization=Bearer%0D%0Ax", "OTEL_EXPORTER_OTLP_HEADERS")
    with pytest.raises(SettingsError, match="control character"):
        header_option("X-Key=a\x00b")
    with pytest.raises(SettingsError, match="header name"):
        header_option("Authorizatión=x")


def test_a_404_names_the_url_it_was_sent_to() -> None:
    """A wrong path is the first day's most common mistake; at the default verbosity nothing else shows the URL."""
    receiver = Receiver(lambda n: Reply(404, {"Content-Type": "text/plain"}, b"404 page not found"))
    try:
        proc = run(["--endpoint", receiver.url.replace("/v1/metrics", "/api/v1/otlp")], data=lines(1))
    finally:
        receiver.stop()
    assert proc.returncode == 0
    assert f"HTTP 404: 404 page not found at {receiver.url.replace('/v1/metrics', '/api/v1/otlp')}" in proc.stderr
    assert "check the endpoint's path" in proc.stderr


def test_a_generic_endpoint_that_already_ends_in_v1_metrics_is_warned_about() -> None:
    receiver = Receiver()
    try:
        proc = run([], env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}, data=lines(1))
        paths = {r.path for r in receiver.received}
    finally:
        receiver.stop()
    assert proc.returncode == 0
    assert paths == {"/v1/metrics/v1/metrics"}  # the specification's rule, kept
    warned = [line for line in proc.stderr.splitlines() if "OTEL_EXPORTER_OTLP_ENDPOINT is a base URL" in line]
    assert len(warned) == 1 and "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT" in warned[0]


def test_an_otlp_grpc_port_is_named_as_such() -> None:
    """The collector's gRPC port (4317) in an OTLP/HTTP endpoint: a real gRPC server answers HTTP/2 frames."""
    grpc = pytest.importorskip("grpc")
    from concurrent import futures

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        proc = run(["--endpoint", f"http://127.0.0.1:{port}/v1/metrics", "--flush-timeout", "0.5"], data=lines(1))
    finally:
        server.stop(0)
    assert proc.returncode == 0
    assert "an HTTP/2-only answer: an OTLP/gRPC port (4317)? OTLP/HTTP is usually on 4318" in proc.stderr


def test_tls_files_that_cannot_be_used_are_exit_2_naming_the_file(tmp_path: Path) -> None:
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("not a certificate")
    for args, env, named in (
        (["--certificate", str(tmp_path / "missing.pem")], {}, "missing.pem': No such file"),
        (["--certificate", str(not_pem)], {}, "ca.pem': not a usable PEM file"),
        ([], {"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": str(not_pem), "OTEL_EXPORTER_OTLP_CLIENT_KEY": str(not_pem)},
         "client certificate"),
    ):  # fmt: skip
        proc = run(["--endpoint", "https://127.0.0.1:4318/v1/metrics", *args], env=env, data=lines(1))
        err = proc.stderr.strip()
        assert proc.returncode == 2 and len(err.splitlines()) == 1 and named in err, err


def test_a_certificate_with_a_plain_http_endpoint_is_warned_about(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("unused")
    receiver = Receiver()
    try:
        proc = run(["--endpoint", receiver.url, "--certificate", str(ca)], data=lines(1))
    finally:
        receiver.stop()
    assert proc.returncode == 0
    assert "is plain http: it is not used and nothing is encrypted" in proc.stderr


def test_a_key_in_the_endpoints_query_is_in_no_log_line() -> None:
    """Some gateways take their key in the query string: the lines that name the endpoint show its path only."""
    receiver = Receiver(lambda n: Reply(404, {"Content-Type": "text/plain"}, b"404 page not found"))
    try:
        proc = run(["--endpoint", f"{receiver.url}?api-key={TOKEN}", "-v", "4"], data=lines(1))
    finally:
        receiver.stop()
    assert proc.returncode == 0
    assert f"{receiver.url}?[query not shown]: check the endpoint's path" in proc.stderr
    assert TOKEN[:8] not in proc.stderr


def test_a_key_in_the_query_of_an_endpoint_that_cannot_be_used_is_not_shown() -> None:
    proc = run(["--endpoint", f"ftp://127.0.0.1:4318/v1/metrics?api-key={TOKEN}"], data=lines(1))
    err = proc.stderr.strip()
    assert proc.returncode == 2 and len(err.splitlines()) == 1 and "scheme must be http or https" in err, err
    assert TOKEN[:8] not in err and "?[query not shown]" in err
