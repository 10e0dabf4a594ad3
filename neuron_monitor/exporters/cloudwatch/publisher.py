"""The sender: takes packed requests from the buffer and calls PutMetricData, retrying what is safe to retry.

Outcomes of one call (``classify``):
* accepted -> counted as sent;
* throttling (``Throttling`` & co, HTTP 429) or a 5xx, or no connection could be made -> the request was not
  accepted: its datums go back to the front of the buffer and the sender waits an exponential backoff with full
  jitter (base * 2^attempt, capped) before the next try;
* the request may have reached CloudWatch but no answer came (read timeout, connection closed mid-request) ->
  dropped and counted as ``unconfirmed``: resending could store the datums twice, and we promise never to;
* any other error (a 4xx such as InvalidParameterValue) -> dropped and counted as ``rejected``.
botocore's own retries are switched off (see ``client.py``) so that this module alone decides what is resent.

``finish(timeout)`` is a total: a call still in progress at its deadline (an endpoint that accepts and never answers
holds one for up to 25 s) is abandoned on its daemon thread, and its datums are counted as ``unconfirmed`` (they may
have reached CloudWatch) or, not sent yet, ``unsent_at_exit``; whatever that thread does afterwards changes no count.
"""

from __future__ import annotations

import enum
import logging
import math
import random
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from neuron_monitor.exporters.cloudwatch.batching import pack
from neuron_monitor.exporters.cloudwatch.buffer import DatumBuffer
from neuron_monitor.exporters.cloudwatch.datum import Datum
from neuron_monitor.exporters.cloudwatch.limits import in_time_window
from neuron_monitor.util.ratelimit import LogRateLimit, held_back

log = logging.getLogger("neuron_monitor.exporters.cloudwatch")

THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "SlowDown",
    }
)


class Outcome(enum.Enum):
    SENT = "sent"
    RETRY = "retry"
    UNCONFIRMED = "unconfirmed"
    REJECTED = "rejected"


MAX_WHY_CHARS = 400  # of a failure's description in a log line (an endpoint may answer a whole HTML page)


def classify(exc: BaseException) -> tuple[Outcome, str]:
    """What a failed PutMetricData call means for its datums, and a short description (one line, at most
    ``MAX_WHY_CHARS``: a wrong ``--endpoint-url`` answered a 40 KB page, all of it in the warning)."""
    outcome, why = _classify(exc)
    why = " ".join(why.split())
    return outcome, why if len(why) <= MAX_WHY_CHARS else why[: MAX_WHY_CHARS - 3] + "..."


def _classify(exc: BaseException) -> tuple[Outcome, str]:
    if isinstance(exc, ClientError):
        err: Mapping[str, Any] = exc.response.get("Error", {})
        code = str(err.get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        if code in THROTTLING_CODES or status == 429:
            return Outcome.RETRY, f"throttled ({code or status})"
        if status >= 500 or code in ("InternalServiceFault", "InternalFailure", "ServiceUnavailable"):
            return Outcome.RETRY, f"server error {status} {code}".rstrip()
        return Outcome.REJECTED, f"{code or status}: {err.get('Message', '')}".rstrip(": ")
    if isinstance(exc, BotoConnectionError):  # nothing was sent: connect refused/timed out, DNS, TLS, proxy
        return Outcome.RETRY, f"no connection: {exc}{_cause(exc)}"
    if isinstance(exc, HTTPClientError):  # sent, but no answer: it may have been stored
        return Outcome.UNCONFIRMED, f"no answer: {exc}"
    if isinstance(exc, BotoCoreError):
        return Outcome.REJECTED, str(exc)
    return Outcome.UNCONFIRMED, f"{type(exc).__name__}: {exc}"


def _cause(exc: BotoCoreError) -> str:
    """Why a connection failed (refused, a certificate not accepted, ...): botocore's message names only the URL."""
    cause = " ".join(str(getattr(exc, "kwargs", {}).get("error") or "").split())[:300]
    return f" ({cause})" if cause else ""


@dataclass
class RetryPolicy:
    base_delay: float = 0.5
    max_delay: float = 20.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Full jitter: uniform in [0, min(max_delay, base * 2^attempt)]."""
        return rng.uniform(0.0, min(self.max_delay, self.base_delay * (2.0 ** min(attempt, 30))))


@dataclass
class PublisherStats:
    requests: int = 0
    requests_ok: int = 0
    datums_sent: int = 0
    samples_sent: int = 0
    bytes_estimated: int = 0
    retries: int = 0
    throttled: int = 0
    server_errors: int = 0
    connection_errors: int = 0
    rejected_samples: int = 0
    unconfirmed_samples: int = 0
    expired_samples: int = 0
    unsent_at_exit: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class Publisher:
    """Runs the send loop in a thread; ``finish`` flushes what is buffered within a deadline."""

    def __init__(
        self,
        client: Any,
        namespace: str,
        buffer: DatumBuffer,
        policy: RetryPolicy | None = None,
        protocol: str = "json",
        log_interval: float = 60.0,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.buffer = buffer
        self.policy = policy or RetryPolicy()
        self.protocol = protocol
        self.stats = PublisherStats()
        self._rng = rng or random.Random()
        self._attempt = 0
        self._deadline = math.inf
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._problem_log = LogRateLimit(log_interval)
        self._lock = threading.Lock()  # the counts, the request held and `_abandoned`
        self._held = 0  # samples of the request taken from the buffer and not yet counted
        self._sending = False  # that request is on its way (or its answer awaited)
        self._failed_attempts = 0  # retried failures since the last accepted request (their end is logged)
        self._resume_log = LogRateLimit(log_interval)
        self._abandoned = False  # `finish` gave up on this thread: it counts nothing more

    # -- logging --------------------------------------------------------------------------------------------------
    def _warn(self, message: str) -> None:
        n = self._problem_log.hit()
        if n is not None:
            log.warning("%s%s", message, held_back(n, "problems"))

    # -- one request ------------------------------------------------------------------------------------------------
    def _packer(self, queue: Any) -> list[Datum]:
        return pack(queue, protocol=self.protocol)

    def send_once(self, batch: list[Datum]) -> Outcome:
        now = time.time()
        fresh = [d for d in batch if in_time_window(d.timestamp, now)]
        samples = sum(d.samples() for d in fresh)
        with self._lock:
            if self._abandoned:  # `finish` counted this request as unsent
                return Outcome.REJECTED
            if len(fresh) != len(batch):
                self.stats.expired_samples += sum(d.samples() for d in batch) - samples
                self._warn("dropped datums older than CloudWatch accepts (buffered for too long)")
            if not fresh:
                self._held = 0
                return Outcome.SENT
            self.stats.requests += 1
            self._held, self._sending = samples, True
        try:
            self.client.put_metric_data(Namespace=self.namespace, MetricData=[d.to_api() for d in fresh])
        except Exception as exc:
            outcome, why = classify(exc)
            with self._lock:
                if self._abandoned:  # `finish` counted this request as unconfirmed
                    return outcome
                self._held, self._sending = 0, False
                self._count_failure(outcome, why, fresh, samples)
            return outcome
        with self._lock:
            if self._abandoned:
                return Outcome.SENT
            self._held, self._sending = 0, False
            self.stats.requests_ok += 1
            self.stats.datums_sent += len(fresh)
            self.stats.samples_sent += samples
            self.stats.bytes_estimated += sum(d.wire_size(self.protocol) for d in fresh)
            failed, self._failed_attempts = self._failed_attempts, 0
        if failed and (n := self._resume_log.hit()) is not None:  # the failures were logged: so is their end
            log.warning(
                "PutMetricData accepted again after %d failed attempt%s%s",
                failed,
                "" if failed == 1 else "s",
                held_back(n, "recoveries"),
            )
        return Outcome.SENT

    def _count_failure(self, outcome: Outcome, why: str, fresh: list[Datum], samples: int) -> None:
        if outcome is Outcome.RETRY:
            if why.startswith("throttled"):
                self.stats.throttled += 1
            elif why.startswith("server"):
                self.stats.server_errors += 1
            else:
                self.stats.connection_errors += 1
            self.buffer.requeue(fresh)
            self._failed_attempts += 1
            self._warn(f"PutMetricData failed, will retry: {why}")
        elif outcome is Outcome.UNCONFIRMED:
            self.stats.unconfirmed_samples += samples
            self._warn(f"PutMetricData got no answer; {samples} samples not resent (never send twice): {why}")
        else:
            self.stats.rejected_samples += samples
            self._warn(f"PutMetricData rejected {samples} samples: {why}")

    # -- the loop ---------------------------------------------------------------------------------------------------
    def run(self) -> None:
        while time.monotonic() < self._deadline and not self._abandoned:
            batch = self.buffer.take(self._packer, timeout=0.5)
            if not batch:
                if self.buffer.closed and len(self.buffer) == 0:
                    return
                continue
            with self._lock:
                if self._abandoned:  # taken after `finish` drained the buffer: counted as unsent here
                    self.stats.unsent_at_exit += sum(d.samples() for d in batch)
                    return
                self._held = sum(d.samples() for d in batch)
            outcome = self.send_once(batch)
            if outcome is Outcome.RETRY:
                delay = self.policy.delay(self._attempt, self._rng)
                self._attempt += 1
                with self._lock:
                    if not self._abandoned:
                        self.stats.retries += 1
                self._wake.wait(max(0.0, min(delay, self._deadline - time.monotonic())))
                self._wake.clear()
            else:
                self._attempt = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="cloudwatch-sender", daemon=True)
        self._thread.start()

    def finish(self, timeout: float) -> None:
        """Stop accepting data, send what is buffered for at most ``timeout`` seconds in all, count what is left (a
        request still in progress then is abandoned: see the module docstring)."""
        self._deadline = time.monotonic() + timeout
        self.buffer.close()
        self._wake.set()  # cut a long backoff short: the deadline now bounds every wait
        if self._thread is not None:
            self._thread.join(max(0.0, self._deadline - time.monotonic()))
        with self._lock:
            self._abandoned = True
            if self._sending:
                self.stats.unconfirmed_samples += self._held
                self._warn(f"PutMetricData got no answer before the exit; {self._held} samples not resent")
            else:
                self.stats.unsent_at_exit += self._held
            self._held = 0
            self.stats.unsent_at_exit += sum(d.samples() for d in self.buffer.drain())
