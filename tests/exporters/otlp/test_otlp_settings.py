"""Settings precedence (command line > OTEL_EXPORTER_OTLP_METRICS_* > OTEL_EXPORTER_OTLP_* > defaults), bad values as
one-line errors, and SigV4: the signature checked against botocore's own signer on a fixed request."""

from __future__ import annotations

import subprocess
import sys

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from neuron_monitor.exporters.otlp.settings import SettingsError, resolve
from neuron_monitor.exporters.otlp.sigv4 import sign
from tests.exporters.otlp.otlp_helpers import trn2
from tests.exporters.otlp.receiver import Receiver


def test_defaults() -> None:
    c = resolve({})
    assert (c.endpoint, c.protocol, c.timeout, c.compression, c.headers) == (
        "http://localhost:4318/v1/metrics",
        "http/protobuf",
        10.0,
        "gzip",
        {},
    )


def test_signal_specific_variables_win_over_generic_and_options_over_both() -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2500",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
        "OTEL_EXPORTER_OTLP_HEADERS": "a=1,b=two%20words",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "none",
    }
    c = resolve(env)
    assert c.endpoint == "http://collector:4318/v1/metrics"  # the base URL gets v1/metrics
    assert (c.timeout, c.protocol, c.headers, c.compression) == (2.5, "http/json", {"a": "1", "b": "two words"}, "none")
    env |= {
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://mimir/otlp/v1/metrics",
        "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "500",
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_METRICS_HEADERS": "x-scope-orgid=tenant-1",
    }
    c = resolve(env)
    assert c.endpoint == "http://mimir/otlp/v1/metrics"  # as it is
    assert (c.timeout, c.protocol, c.headers) == (0.5, "http/protobuf", {"x-scope-orgid": "tenant-1"})
    c = resolve(env, endpoint="http://127.0.0.1:9090", protocol="http/json", headers=[("a", "9")], timeout=3.0)
    assert c.endpoint == "http://127.0.0.1:9090/v1/metrics"  # no path: /v1/metrics
    assert (c.protocol, c.timeout, c.headers) == ("http/json", 3.0, {"x-scope-orgid": "tenant-1", "a": "9"})


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"),
        ({"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "soon"}, "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT"),
        ({"OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, "OTEL_EXPORTER_OTLP_HEADERS"),
        ({"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, "OTEL_EXPORTER_OTLP_COMPRESSION"),
    ],
)
def test_bad_variables_are_one_line_errors(env: dict[str, str], names: str) -> None:
    with pytest.raises(SettingsError, match=names):
        resolve(env)
    proc = subprocess.run(
        [sys.executable, "-m", "neuron_monitor.exporters.otlp.cli"],
        input=b"",
        capture_output=True,
        env={**env, "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.decode().count("\n") == 1 and names.split("=")[0] in proc.stderr.decode()


FIXED_CREDENTIALS = Credentials("AKIDEXAMPLEKEYID0000", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token-xyz")


def test_sigv4_signature_is_botocores_own_on_a_fixed_request() -> None:
    url = "https://monitoring.us-west-2.amazonaws.com/v1/metrics"
    body = b"\x0a\x03abc"
    headers = {
        "Content-Type": "application/x-protobuf",
        "Content-Encoding": "gzip",
        "Host": "monitoring.us-west-2.amazonaws.com",
    }
    got = sign(FIXED_CREDENTIALS, "us-west-2", url, body, headers)
    assert got["X-Amz-Security-Token"] == "session-token-xyz"
    # botocore's signer, given the same request and the same timestamp, computes the same signature
    request = AWSRequest(method="POST", url=url, data=body, headers={**headers, "X-Amz-Date": got["X-Amz-Date"]})
    request.headers["X-Amz-Security-Token"] = "session-token-xyz"
    signer = SigV4Auth(FIXED_CREDENTIALS, "monitoring", "us-west-2")
    request.context["timestamp"] = got["X-Amz-Date"]
    canonical = signer.canonical_request(request)
    signature = signer.signature(signer.string_to_sign(request, canonical), request)
    assert got["Authorization"].startswith(
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLEKEYID0000/"
        + got["X-Amz-Date"][:8]
        + "/us-west-2/monitoring/aws4_request"
    )
    assert got["Authorization"].endswith("Signature=" + signature)


def test_sigv4_end_to_end_signs_what_it_sends_and_logs_no_credential() -> None:
    import orjson

    receiver = Receiver()
    env = {
        "PATH": "/usr/bin:/bin",
        "AWS_ACCESS_KEY_ID": FIXED_CREDENTIALS.access_key,
        "AWS_SECRET_ACCESS_KEY": FIXED_CREDENTIALS.secret_key,
        "AWS_SESSION_TOKEN": "session-token-secret-value",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "neuron_monitor.exporters.otlp.cli", "--endpoint", receiver.url, "--sigv4",
             "us-west-2", "-v", "4", "--header", "Authorization=Bearer very-secret-bearer"],
            input=orjson.dumps(trn2(0, runtimes=1)) + b"\n",
            capture_output=True,
            env=env,
            timeout=60,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr.decode()
        got, _closing = receiver.received  # the report, then the closing push of the exporter's own metrics
    finally:
        receiver.stop()
    err = proc.stderr.decode()
    for secret in (FIXED_CREDENTIALS.access_key, FIXED_CREDENTIALS.secret_key, "session-token-secret-value",
                   "very-secret-bearer"):  # fmt: skip
        assert secret not in err
    headers = got.headers
    assert headers["X-Amz-Security-Token"] == "session-token-secret-value"
    credentials = Credentials(FIXED_CREDENTIALS.access_key, FIXED_CREDENTIALS.secret_key, "session-token-secret-value")
    request = AWSRequest(
        method="POST",
        url=receiver.url,
        data=got.raw,
        headers={
            k: v
            for k, v in headers.items()
            if k not in ("Authorization", "User-Agent", "Accept-Encoding", "Content-Length")
        },
    )
    signer = SigV4Auth(credentials, "monitoring", "us-west-2")
    request.context["timestamp"] = headers["X-Amz-Date"]
    signature = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    assert headers["Authorization"].endswith("Signature=" + signature)


def test_a_timeout_variable_written_in_seconds_is_warned_about() -> None:
    """OTEL_EXPORTER_OTLP_TIMEOUT is milliseconds (the specification); "10" meant as seconds is 10 ms."""
    c = resolve({"OTEL_EXPORTER_OTLP_TIMEOUT": "10"})
    assert c.timeout == 0.01
    assert c.warnings == [
        "OTEL_EXPORTER_OTLP_TIMEOUT=10 is 10 ms (the variable is in milliseconds; 10000 is 10 s): most exchanges"
        " will time out"
    ]
    assert resolve({"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "2500"}).warnings == []
    assert resolve({"OTEL_EXPORTER_OTLP_TIMEOUT": "10"}, timeout=0.05).warnings == []  # the option: seconds, as asked


def test_the_region_of_a_cloudwatch_endpoint() -> None:
    from neuron_monitor.exporters.otlp.sigv4 import region_of_endpoint

    assert region_of_endpoint("monitoring.us-west-2.amazonaws.com") == "us-west-2"
    assert region_of_endpoint("monitoring-fips.us-gov-west-1.amazonaws.com") == "us-gov-west-1"
    assert region_of_endpoint("monitoring.cn-north-1.amazonaws.com.cn") == "cn-north-1"
    assert region_of_endpoint("127.0.0.1") == region_of_endpoint("mimir.example") == ""


def test_sigv4_for_another_region_than_the_endpoints_is_warned_about() -> None:
    """`--endpoint https://monitoring.us-west-2.amazonaws.com/v1/metrics --sigv4 us-east-1`: every request 403."""
    env = {
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "example-secret",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": "/nonexistent",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
        "PATH": "/usr/bin:/bin",
    }
    args = ["--endpoint", "https://monitoring.us-west-2.amazonaws.com/v1/metrics", "--flush-timeout", "0"]
    for region, warned in (("us-east-1", True), ("us-west-2", False)):
        proc = subprocess.run(
            [sys.executable, "-m", "neuron_monitor.exporters.otlp.cli", *args, "--sigv4", region],
            input=b"",
            capture_output=True,
            env=env,
            timeout=120,
        )
        err = proc.stderr.decode()
        assert proc.returncode == 0, err
        line = "--sigv4 signs for region us-east-1 but the endpoint monitoring.us-west-2.amazonaws.com is in us-west-2"
        assert (line in err) is warned, err


def test_cloudwatchs_endpoint_without_sigv4_is_warned_about() -> None:
    args = ["--endpoint", "https://monitoring.us-west-2.amazonaws.com/v1/metrics", "--flush-timeout", "0"]
    proc = subprocess.run(
        [sys.executable, "-m", "neuron_monitor.exporters.otlp.cli", *args], input=b"", capture_output=True, timeout=120
    )
    assert proc.returncode == 0
    assert "monitoring.us-west-2.amazonaws.com is CloudWatch's, which refuses unsigned requests (403): add --sigv4" in (
        proc.stderr.decode()
    )


def test_a_header_written_with_a_colon_gets_a_hint_without_its_value() -> None:
    from neuron_monitor.exporters.otlp.settings import header_option, parse_headers

    with pytest.raises(SettingsError) as e:
        header_option("Authorization: Bearer abc==secret")
    assert str(e.value) == "--header: expected NAME=VALUE with a header name (written as 'Authorization: ...'? use" \
        " Authorization=...)"  # fmt: skip
    with pytest.raises(SettingsError, match=r"'X-Scope-OrgID: \.\.\.'\? use X-Scope-OrgID=\.\.\.\)$"):
        parse_headers("X-Scope-OrgID: tenant-1", "OTEL_EXPORTER_OTLP_HEADERS")
    with pytest.raises(SettingsError, match=r"header name$"):
        header_option("no equals sign")
