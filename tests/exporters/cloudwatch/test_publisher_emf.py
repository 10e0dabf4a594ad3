"""Error classification, backoff with jitter, the send loop's accounting, and EMF encoding within its limits."""

from __future__ import annotations

import copy
import logging
import random
import time
from typing import Any

import orjson
import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    ParamValidationError,
    ReadTimeoutError,
)

from neuron_monitor.exporters.cloudwatch.buffer import DatumBuffer
from neuron_monitor.exporters.cloudwatch.datum import Datum
from neuron_monitor.exporters.cloudwatch.emf import MAX_EVENT_BYTES, encode_events
from neuron_monitor.exporters.cloudwatch.mapping import MapOptions, ReportMapper
from neuron_monitor.exporters.cloudwatch.publisher import Outcome, Publisher, RetryPolicy, classify


def client_error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutMetricData"
    )


@pytest.mark.parametrize(
    ("exc", "outcome"),
    [
        (client_error("Throttling", 400), Outcome.RETRY),
        (client_error("ThrottlingException", 400), Outcome.RETRY),
        (client_error("", 429), Outcome.RETRY),
        (client_error("503", 503), Outcome.RETRY),
        (client_error("InternalServiceFault", 500), Outcome.RETRY),
        (client_error("InvalidParameterValue", 400), Outcome.REJECTED),
        (client_error("AccessDenied", 403), Outcome.REJECTED),
        (EndpointConnectionError(endpoint_url="http://x"), Outcome.RETRY),
        (ReadTimeoutError(endpoint_url="http://x"), Outcome.UNCONFIRMED),
        (ConnectionClosedError(endpoint_url="http://x"), Outcome.UNCONFIRMED),
        (ParamValidationError(report="bad"), Outcome.REJECTED),
    ],
)
def test_classify(exc: BaseException, outcome: Outcome) -> None:
    assert classify(exc)[0] is outcome


def test_backoff_is_exponential_capped_and_jittered() -> None:
    policy, rng = RetryPolicy(base_delay=0.5, max_delay=20.0), random.Random(7)
    for attempt in range(12):
        ceiling = min(20.0, 0.5 * 2**attempt)
        delays = [policy.delay(attempt, rng) for _ in range(200)]
        assert all(0 <= d <= ceiling for d in delays)
        assert max(delays) > 0.8 * ceiling and min(delays) < 0.2 * ceiling  # spread over [0, ceiling]


class ScriptedClient:
    """Fails the first calls as scripted, then stores what it is sent."""

    def __init__(self, failures: list[BaseException]) -> None:
        self.failures = list(failures)
        self.calls = 0
        self.stored: list[dict[str, Any]] = []

    def put_metric_data(self, Namespace: str, MetricData: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls += 1
        assert len(MetricData) <= 1000
        if self.failures:
            raise self.failures.pop(0)
        self.stored.extend(MetricData)
        return {}


def samples(data: list[dict[str, Any]]) -> int:
    return sum(int(sum(d["Counts"])) if "Counts" in d else 1 for d in data)


def run_publisher(client: ScriptedClient, datums: list[Datum]) -> Publisher:
    buf = DatumBuffer(log_interval=3600)
    pub = Publisher(client, "ns", buf, RetryPolicy(0.001, 0.01), log_interval=3600)
    pub.start()
    buf.put(datums)
    pub.finish(timeout=10)
    return pub


def test_retries_until_accepted_and_sends_each_sample_once(trn1_report: dict[str, Any]) -> None:
    datums = ReportMapper().map(trn1_report, now=time.time())
    client = ScriptedClient(
        [client_error("Throttling", 400)] * 3
        + [client_error("503", 503), EndpointConnectionError(endpoint_url="http://x")]
    )
    pub = run_publisher(client, datums)
    assert client.calls == 6
    assert samples(client.stored) == len(datums) == pub.stats.samples_sent
    assert pub.stats.throttled == 3 and pub.stats.server_errors == 1 and pub.stats.connection_errors == 1
    assert pub.stats.retries == 5 and pub.stats.unsent_at_exit == 0


def test_no_answer_is_never_resent() -> None:
    now = time.time()
    datums = [Datum("M", "Count", (("D", str(i)),), now, float(i)) for i in range(1500)]
    client = ScriptedClient([ReadTimeoutError(endpoint_url="http://x")])
    pub = run_publisher(client, datums)
    assert pub.stats.unconfirmed_samples == 1000  # the first request's datums: maybe stored, so not resent
    assert samples(client.stored) == 500 and client.calls == 2


def test_rejected_request_is_dropped_and_counted() -> None:
    now = time.time()
    datums = [Datum("M", "Count", (("D", str(i)),), now, float(i)) for i in range(10)]
    client = ScriptedClient([client_error("InvalidParameterValue", 400)])
    pub = run_publisher(client, datums)
    assert pub.stats.rejected_samples == 10 and client.stored == [] and client.calls == 1


def test_flush_deadline_counts_what_is_left() -> None:
    now = time.time()
    client = ScriptedClient([client_error("Throttling", 400)] * 10_000)
    buf = DatumBuffer(log_interval=3600)
    pub = Publisher(client, "ns", buf, RetryPolicy(0.05, 0.1), log_interval=3600)
    pub.start()
    buf.put([Datum("M", "Count", (), now, 1.0)] * 5)
    t0 = time.monotonic()
    pub.finish(timeout=0.5)
    assert time.monotonic() - t0 < 60  # returns at its deadline, not after 10 000 retries (about 12 minutes)
    assert pub.stats.unsent_at_exit == 5 and pub.stats.samples_sent == 0


# ---- EMF --------------------------------------------------------------------------------------------------------


def decode(lines: list[bytes]) -> list[dict[str, Any]]:
    assert all(line.endswith(b"\n") and len(line) <= MAX_EVENT_BYTES for line in lines)
    return [orjson.loads(line) for line in lines]


def emf_samples(events: list[dict[str, Any]]) -> list[tuple[str, tuple[tuple[str, str], ...], float, str]]:
    """(metric, dims, value, unit) for every value in every event, checked against its directive."""
    out = []
    for ev in events:
        (directive,) = ev["_aws"]["CloudWatchMetrics"]
        (dimset,) = directive["Dimensions"]
        assert len(dimset) <= 30 and len(directive["Metrics"]) <= 100
        assert directive["Namespace"] == "neuron_monitor"
        dims = tuple((k, ev[k]) for k in dimset)
        names = [m["Name"] for m in directive["Metrics"]]
        assert len(names) == len(set(names))
        for m in directive["Metrics"]:
            v = ev[m["Name"]]
            values = v if isinstance(v, list) else [v]
            assert len(values) <= 100
            out.extend((m["Name"], dims, x, m["Unit"]) for x in values)
    return out


def test_emf_every_datum_once_with_units_and_dims(trn1_report: dict[str, Any]) -> None:
    report = copy.deepcopy(trn1_report)
    report["report_time"] = 1_700_000_000.25
    datums = ReportMapper().map(report)
    events = decode(encode_events(datums, "neuron_monitor"))
    assert {ev["_aws"]["Timestamp"] for ev in events} == {1_700_000_000_250}
    got = sorted(emf_samples(events))
    want = sorted((d.name, d.dims, d.value, d.unit) for d in datums)
    assert got == want
    assert len(events) < len(datums) / 5  # grouped by dimension set, not one event per datum


def test_emf_splits_wide_groups_and_repeated_samples(wandb_reports: list[dict[str, Any]]) -> None:
    now = 1_700_000_000.0
    wide = [Datum(f"M{i}", "Count", (("InstanceId", "i-1"),), now, float(i)) for i in range(250)]
    repeated = [Datum("Lat", "Seconds", (("InstanceId", "i-1"),), now, float(i) / 1000) for i in range(230)]
    events = decode(encode_events(wide + repeated, "neuron_monitor"))
    got = emf_samples(events)
    assert sorted(got) == sorted((d.name, d.dims, d.value, d.unit) for d in wide + repeated)
    high = ReportMapper(options=MapOptions(high_resolution=True)).map(wandb_reports[0], now=now)
    for ev in decode(encode_events(high, "neuron_monitor")):
        assert all(m["StorageResolution"] == 1 for m in ev["_aws"]["CloudWatchMetrics"][0]["Metrics"])


def test_a_connection_failure_says_why() -> None:
    """botocore's EndpointConnectionError names only the URL; a certificate CloudWatch's endpoint (or a proxy) shows
    that the machine does not accept must be named, or a day-one TLS problem reads as a network outage."""
    from botocore.exceptions import EndpointConnectionError

    why = "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate"
    outcome, text = classify(EndpointConnectionError(endpoint_url="https://monitoring.example/", error=why))
    assert outcome is Outcome.RETRY
    assert text == f'no connection: Could not connect to the endpoint URL: "https://monitoring.example/" ({why})'


def test_a_long_answer_is_one_short_line() -> None:
    """A wrong --endpoint-url (a web server) answers a whole page: the warning keeps one line of 400 characters."""
    page = "<html>\n" + "<p>not CloudWatch</p>\n" * 2000 + "</html>"
    error = ClientError({"Error": {"Code": "404", "Message": page}, "ResponseMetadata": {"HTTPStatusCode": 404}}, "Put")
    outcome, why = classify(error)
    assert outcome is Outcome.REJECTED
    assert why.startswith("404: <html> <p>not CloudWatch</p> <p>") and why.endswith("...") and len(why) == 400
    assert "\n" not in why


def test_the_end_of_a_failure_streak_is_logged(trn1_report: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    """The failures are warnings; without their end the log of a recovered endpoint reads as an outage."""
    datums = ReportMapper().map(trn1_report, now=time.time())
    client = ScriptedClient([client_error("Throttling", 400)] * 2 + [EndpointConnectionError(endpoint_url="http://x")])
    with caplog.at_level(logging.WARNING, logger="neuron_monitor.exporters.cloudwatch"):
        run_publisher(client, datums)
    again = [r.getMessage() for r in caplog.records if "accepted again" in r.getMessage()]
    assert again == ["PutMetricData accepted again after 3 failed attempts"]
