"""The sender thread: delivers the buffer's requests in order, retrying what the OTLP specification says to retry.

Outcome of one exchange (``classify``), as OTLP/HTTP defines them (opentelemetry-proto
``docs/specification.md``, "OTLP/HTTP Response" and "Failures"):

- 2xx (or an answer too long to read: the request reached the receiver): delivered. A ``partial_success`` with
  rejected data points is counted (``partial_rejected_points``) and logged at most once a minute with the receiver's
  message;
- 429, 502, 503, 504, no connection, a connection closed or a deadline passed before an answer: retried after an
  exponential backoff with full jitter (a random wait up to ``base x 2^attempt``, at most ``max_delay``), or after
  the answer's ``Retry-After`` (seconds or an HTTP date, at most ``RETRY_AFTER_CAP``). The request stays at the
  head of the buffer meanwhile, so reports are delivered in order and nothing is lost while the buffer has room;
- a redirect: not followed (the endpoint should name the final URL); dropped and counted as rejected, with an
  error naming where it pointed;
- any other status (400, 401, 403, 413, 500 ...): the specification says not to retry; dropped and counted.
"""

from __future__ import annotations

import email.utils
import enum
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from neuron_monitor.exporters.otlp import jsonwire, wire
from neuron_monitor.exporters.otlp.buffer import RequestBuffer
from neuron_monitor.exporters.otlp.transport import Answer, Transport
from neuron_monitor.util.ratelimit import LogRateLimit, held_back
from neuron_monitor.util.sanitize import sanitize

log = logging.getLogger("neuron_monitor.exporters.otlp")

RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})
NO_SUCH_PATH = frozenset({404, 405})  # the endpoint's path is not the receiver's OTLP path: the line names the URL
RETRY_AFTER_CAP = 300.0  # seconds: a longer Retry-After is shortened to this
MESSAGE_CHARS = 300  # of a receiver's message shown in a log line


class Outcome(enum.Enum):
    SENT = "sent"
    RETRY = "retry"
    REJECTED = "rejected"


@dataclass
class RetryPolicy:
    base_delay: float = 0.5
    max_delay: float = 30.0

    def backoff(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        """Full jitter: a random wait in [0, min(max_delay, base x 2^attempt)]."""
        ceiling = min(self.max_delay, self.base_delay * (2.0 ** min(attempt, 60)))
        return ceiling * rng()


def retry_after(value: str, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delay-seconds or an HTTP date), capped; None if unusable."""
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        return min(float(value), RETRY_AFTER_CAP)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    delay = when.timestamp() - (time.time() if now is None else now)
    return min(max(delay, 0.0), RETRY_AFTER_CAP)


Scrub = Callable[[str], str]


def _keep(text: str) -> str:
    return text


def classify(answer: Answer, scrub: Scrub = _keep) -> tuple[Outcome, str]:
    """What an exchange's answer means for its request, and a short description; ``scrub`` takes the credentials
    out of the receiver's text before it is shortened (a secret cut in two would no longer be found whole)."""
    if answer.too_large:  # the receiver answered, at length: the request reached it (not sent again)
        return Outcome.SENT, ""
    if answer.status == 0:
        return Outcome.RETRY, answer.error or "no answer"
    if 200 <= answer.status < 300:
        return Outcome.SENT, ""
    if answer.status in RETRYABLE_STATUSES:
        return Outcome.RETRY, f"HTTP {answer.status}" + _message(answer, scrub)
    if 300 <= answer.status < 400:
        where = sanitize(scrub(answer.location))[:MESSAGE_CHARS] or "no Location"
        return Outcome.REJECTED, f"HTTP {answer.status} redirect to {where} not followed (set the endpoint to it)"
    return Outcome.REJECTED, f"HTTP {answer.status}" + _message(answer, scrub)


def _message(answer: Answer, scrub: Scrub) -> str:
    """The receiver's error text: a google.rpc.Status message, else the start of the body (printable only)."""
    if not answer.body:
        return ""
    text = ""
    if "protobuf" in answer.content_type:
        text = wire.status_message(answer.body)
    if not text:
        text = answer.body.decode("utf-8", "replace")  # whole (at most 64 KiB): scrubbed, then shortened
    text = sanitize(" ".join(scrub(text).split()))[:MESSAGE_CHARS]
    return f": {text}" if text else ""


@dataclass
class SendStats:
    requests_sent: int = 0
    points_sent: int = 0
    retries: int = 0
    rejected_requests: int = 0
    rejected_points: int = 0
    partial_rejected_points: int = 0
    unreadable_answers: int = 0
    last_error: str = ""

    def as_dict(self) -> dict[str, int | str]:
        return asdict(self)


class Sender:
    """Delivers ``buffer``'s requests through ``transport`` on its own thread (see the module docstring)."""

    def __init__(
        self,
        buffer: RequestBuffer,
        transport: Transport,
        headers: dict[str, str],
        policy: RetryPolicy,
        json: bool = False,
        rng: Callable[[], float] = random.random,
        log_interval: float = 60.0,
        scrub: Scrub = _keep,
    ) -> None:
        self.buffer = buffer
        self.transport = transport
        self.headers = headers
        self.policy = policy
        self.json = json
        self.rng = rng
        self.scrub = scrub  # takes credentials out of a receiver's text before it is shortened (see classify)
        self.stats = SendStats()
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="otlp-sender", daemon=True)
        self._partial_log = LogRateLimit(log_interval)
        self._retry_log = LogRateLimit(log_interval)
        self._resume_log = LogRateLimit(log_interval)
        self._reject_log = LogRateLimit(log_interval)
        self._unreadable_log = LogRateLimit(log_interval)
        self.delivering = threading.Event()  # set while a request is out (tests, the exit path)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop now: no new exchange, the one in progress cut, no more waiting."""
        self._stopping = True
        self._wake.set()
        self.transport.abort()
        self.buffer.close()

    def join(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        attempt = 0
        while not self._stopping:
            request = self.buffer.head(timeout=1.0)
            if request is None:
                if self.buffer.closed:
                    return
                continue
            self.delivering.set()
            try:
                answer = self.transport.post(request.body, self.headers)
            finally:
                self.delivering.clear()
            if self._stopping:
                self.buffer.release()
                return
            outcome, why = classify(answer, self.scrub)
            if outcome is Outcome.RETRY:
                self.buffer.release()
                self.stats.retries += 1
                self.stats.last_error = why
                delay = retry_after(answer.retry_after) if answer.retry_after else None
                if delay is None:
                    delay = self.policy.backoff(attempt, self.rng)
                attempt += 1
                n = self._retry_log.hit()
                if n is not None:
                    log.warning(
                        "delivery failed (%s); retrying in %.1f s (%d reports queued)%s",
                        why,
                        delay,
                        len(self.buffer),
                        held_back(n, "failed attempts"),
                    )
                self._wake.wait(delay)
                continue
            failed, attempt = attempt, 0
            self.buffer.done(request)
            if outcome is Outcome.SENT:
                if failed and (n := self._resume_log.hit()) is not None:  # the failures were logged: so is their end
                    log.warning(
                        "delivering again after %d failed attempt%s (%d reports queued)%s",
                        failed,
                        "" if failed == 1 else "s",
                        len(self.buffer),
                        held_back(n, "recoveries"),
                    )
                self.stats.requests_sent += 1
                self.stats.points_sent += request.points
                self._partial(answer)
            else:
                if answer.status in NO_SUCH_PATH:
                    why += (
                        f" at {self.transport.endpoint.shown}: check the endpoint's path and that the receiver"
                        " takes OTLP (docs/otlp.md, Receivers)"
                    )
                self.stats.rejected_requests += 1
                self.stats.rejected_points += request.points
                self.stats.last_error = why
                n = self._reject_log.hit()
                if n is not None:
                    log.error(
                        "the receiver refused a request of %d points (%s); dropped%s",
                        request.points,
                        why,
                        held_back(n, "refused requests"),
                    )

    def _partial(self, answer: Answer) -> None:
        if not answer.body or answer.too_large:
            if answer.too_large:
                self._unreadable(answer.error)
            return
        try:
            if "json" in answer.content_type or (self.json and "protobuf" not in answer.content_type):
                rejected, message = jsonwire.partial_success(answer.body)
            else:
                rejected, message = wire.partial_success(answer.body)
        except ValueError as e:
            self._unreadable(str(e))
            return
        if rejected > 0 or message:
            self.stats.partial_rejected_points += max(rejected, 0)
            n = self._partial_log.hit()
            if n is not None:
                log.warning(
                    "the receiver rejected %d data points of a request: %s%s",
                    rejected,
                    sanitize(" ".join(self.scrub(message).split()))[:MESSAGE_CHARS] or "(no message)",
                    held_back(n, "partial successes"),
                )

    def _unreadable(self, why: str) -> None:
        self.stats.unreadable_answers += 1
        n = self._unreadable_log.hit()
        if n is not None:
            log.warning(
                "could not read the receiver's answer to a delivered request: %s%s", why, held_back(n, "answers")
            )
