"""A password in a URL a user gives (``http://user:password@host``) never reaches an error or log line.

Before: ``neuron-monitor-health --url`` showed the URL with its password in the verdict's line ("unknown:
http://admin:<password>@…: Connection refused"); ``--k8s-api`` of the daemon and of neuron-monitor-taint, and
``neuron-monitor-otlp --endpoint`` with a wrong scheme or no host, echoed it in their exit-2 line; the CloudWatch
exporter's "could not connect to the endpoint URL" warnings carried the ``--endpoint-url``'s password (at every
verbosity, 16 lines at ``-v 4``). After: ``[REDACTED]@`` where the user information was (util/sanitize.url_shown,
and the CloudWatch/OTLP log redactor). Real processes; nothing listens on the ports used (connections are refused).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import orjson
import pytest

from neuron_monitor.util.sanitize import url_shown
from tests.exporters.cloudwatch.conftest import encode_lines, exporter_cmd, free_port
from tests.hostile.test_cloudwatch_stops import REPORTS

SECRET = "hunter2-Url-Pa55word"
DEADLINE = 60.0


def _run(cmd: list[str], stdin: bytes = b"", env: dict[str, str] | None = None) -> str:
    done = subprocess.run(cmd, input=stdin, capture_output=True, timeout=DEADLINE, env=env, check=False)
    return (done.stdout + done.stderr).decode(errors="replace")


def _bin(name: str) -> str:
    return os.path.join(os.path.dirname(sys.executable), name)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://u:pw@h:9/x?q#f", "http://[REDACTED]@h:9/x?q#f"),
        ("htp://u:pw@h", "htp://[REDACTED]@h"),
        ("u:pw@h:9", "[REDACTED]@h:9"),
        ("http://u:p@w@h/", "http://[REDACTED]@h/"),
        ("https://h/path@not-userinfo", "https://h/path@not-userinfo"),
        ("http://h:9", "http://h:9"),
    ],
)
def test_url_shown_hides_the_user_information(url: str, shown: str) -> None:
    assert url_shown(url) == shown


def test_health_url_with_a_password() -> None:
    port = free_port()
    for url in (f"http://admin:{SECRET}@127.0.0.1:{port}/", f"htp://admin:{SECRET}@127.0.0.1:{port}/"):
        out = _run([_bin("neuron-monitor-health"), "--url", url, "--timeout", "5"])
        assert SECRET not in out and "[REDACTED]@127.0.0.1" in out, out


@pytest.mark.parametrize("command", ["neuron-monitor-taint", "neuron-monitor"])
def test_k8s_api_url_with_a_password(command: str) -> None:
    url = f"htp://u:{SECRET}@127.0.0.1:9"
    args = ["--k8s-api", url, "--node-name", "n"]
    if command == "neuron-monitor":
        args += ["--k8s-info", "--once", "--no-imds"]
    out = _run([_bin(command), *args])
    assert SECRET not in out and "[REDACTED]@127.0.0.1" in out, out


@pytest.mark.parametrize("url", [f"htps://u:{SECRET}@127.0.0.1:9/v1/metrics", f"http://u:{SECRET}@/v1/metrics"])
def test_otlp_endpoint_with_a_password(url: str) -> None:
    out = _run([_bin("neuron-monitor-otlp"), "--endpoint", url])
    assert SECRET not in out and "must not carry credentials" in out, out


@pytest.mark.parametrize("verbose", ["2", "4"])
def test_cloudwatch_endpoint_url_with_a_password(verbose: str) -> None:
    lines = [orjson.loads(line) for line in REPORTS.read_bytes().splitlines() if line.strip()]
    now = time.time()
    reports = encode_lines([{**lines[i], "report_time": now - 3 + i} for i in range(2)])
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        "AWS_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": "/nonexistent",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
    }
    url = f"http://u:{SECRET}@127.0.0.1:{free_port()}"
    out = _run(exporter_cmd("--endpoint-url", url, "--flush-timeout", "1", "-v", verbose), reports, env)
    assert "summary" in out and "127.0.0.1" in out, out  # it tried, and said where
    assert SECRET not in out, [line for line in out.splitlines() if SECRET in line][:3]


def test_otlp_a_short_header_value_is_never_in_a_debug_line() -> None:
    """With --sigv4, botocore's debug CanonicalRequest lists the signed headers with their values; a header value
    shorter than the redactor's 8 characters for literal secrets (an API key such as ``k3y9zq``) was shown there."""
    lines = [orjson.loads(line) for line in REPORTS.read_bytes().splitlines() if line.strip()]
    report = encode_lines([{**lines[0], "report_time": time.time() - 1}])
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }
    out = _run(
        [_bin("neuron-monitor-otlp"), "--endpoint", f"http://127.0.0.1:{free_port()}/v1/metrics", "--sigv4",
         "us-west-2", "--header", "X-Api-Key=k3y9zq", "--flush-timeout", "1", "-v", "4"],
        report,
        env,
    )  # fmt: skip
    assert "CanonicalRequest" in out and "x-api-key:[REDACTED]" in out, out[-2000:]
    assert "k3y9zq" not in out
