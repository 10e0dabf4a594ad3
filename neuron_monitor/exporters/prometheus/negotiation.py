"""Content negotiation for ``/metrics``: ``Accept-Encoding`` with q-values, and the exposition format from ``Accept``.

``gzip_accepted`` follows RFC 9110 section 12.5.3: a coding is acceptable when listed with a q-value above 0;
``gzip;q=0`` refuses it, ``*`` stands for every coding not listed, and names are case-insensitive. Unknown
codings (``nogzip``, ``br``) are not gzip. Answers are memoised per header value (scrapers send the same one
every time), in a bounded table.
"""

from __future__ import annotations

from functools import lru_cache

from prometheus_client.exposition import choose_encoder

OPENMETRICS = "application/openmetrics-text"
_MEMO_LIMIT = 512  # longer header values are parsed every time, not memoised


def _q(params: list[str]) -> float:
    """The q-value among a coding's parameters (1 when absent, 0 when unreadable)."""
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                q = float(value.strip())
            except ValueError:
                return 0.0
            return q if 0.0 <= q <= 1.0 else 0.0
    return 1.0


def gzip_accepted(header: str | None) -> bool:
    """Whether an ``Accept-Encoding`` header value allows a gzip-coded response."""
    if not header:
        return False
    return _gzip_cached(header) if len(header) <= _MEMO_LIMIT else _gzip_accepted(header)


@lru_cache(maxsize=128)
def _gzip_cached(header: str) -> bool:
    return _gzip_accepted(header)


def _gzip_accepted(header: str) -> bool:
    explicit: float | None = None
    star: float | None = None
    for item in header.split(","):
        coding, *params = item.split(";")
        coding = coding.strip().lower()
        if coding in ("gzip", "x-gzip"):
            q = _q(params)
            explicit = q if explicit is None else max(explicit, q)
        elif coding == "*":
            star = _q(params)
    if explicit is not None:
        return explicit > 0
    return star is not None and star > 0


def exposition_format(accept: str | None) -> tuple[bool, str]:
    """(OpenMetrics?, Content-Type) for an ``Accept`` header, as client_python negotiates it."""
    accept = accept or ""
    return _format_cached(accept) if len(accept) <= _MEMO_LIMIT else _format(accept)


@lru_cache(maxsize=128)
def _format_cached(accept: str) -> tuple[bool, str]:
    return _format(accept)


def _format(accept: str) -> tuple[bool, str]:
    _, content_type = choose_encoder(accept)
    return content_type.startswith(OPENMETRICS), content_type
