"""The exporter's settings: the command line over the OpenTelemetry environment variables over the defaults.

Precedence, as the OpenTelemetry specification gives it ("OpenTelemetry Protocol Exporter", configuration
options): a signal-specific variable (``OTEL_EXPORTER_OTLP_METRICS_*``) wins over the generic one
(``OTEL_EXPORTER_OTLP_*``); a command-line option wins over both. Endpoints: ``--endpoint`` and
``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` are the metrics URL as they are (a URL with no path gets ``/v1/metrics``);
``OTEL_EXPORTER_OTLP_ENDPOINT`` is a base URL to which ``v1/metrics`` is appended. Timeouts in the variables are
milliseconds, ``--timeout`` is seconds. Headers: the variable's ``key=value,...`` list (values percent-decoded),
then each ``--header K=V`` on top.
"""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

PROTOBUF = "http/protobuf"
JSON = "http/json"
PROTOCOLS = (PROTOBUF, JSON)
DEFAULT_ENDPOINT = "http://localhost:4318/v1/metrics"
METRICS_PATH = "/v1/metrics"
DEFAULT_TIMEOUT = 10.0
SHORT_TIMEOUT = 0.1  # seconds: a timeout variable below it is most likely seconds written as milliseconds
COMPRESSIONS = ("gzip", "none")


class SettingsError(ValueError):
    """A setting (option or variable) cannot be used: one line naming it."""


@dataclass
class Connection:
    endpoint: str = DEFAULT_ENDPOINT
    protocol: str = PROTOBUF
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    compression: str = "gzip"
    certificate: str = ""
    client_certificate: str = ""
    client_key: str = ""
    warnings: list[str] = field(default_factory=list)  # settings that work but are likely a mistake (logged)


def _pick(env: Mapping[str, str], name: str) -> tuple[str, str] | None:
    """(variable, value) of OTEL_EXPORTER_OTLP_METRICS_<name>, else OTEL_EXPORTER_OTLP_<name>; None if neither."""
    for var in (f"OTEL_EXPORTER_OTLP_METRICS_{name}", f"OTEL_EXPORTER_OTLP_{name}"):
        value = env.get(var, "").strip()
        if value:
            return var, value
    return None


def parse_headers(text: str, where: str) -> dict[str, str]:
    """A ``key=value,key=value`` list (W3C Baggage syntax, values percent-decoded)."""
    headers: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or not _token(key):
            raise SettingsError(f"{where}: an entry is not key=value with a header name as key{_colon_hint(item)}")
        decoded = urllib.parse.unquote(value.strip())
        if problem := header_value_problem(decoded):
            raise SettingsError(f"{where}: the value of {key} {problem}")
        headers[key] = decoded
    return headers


def header_option(text: str) -> tuple[str, str]:
    """``--header K=V``."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or not _token(key):
        raise SettingsError(f"--header: expected NAME=VALUE with a header name{_colon_hint(text)}")
    value = value.strip()
    if problem := header_value_problem(value):
        raise SettingsError(f"--header {key}: the value {problem}")
    return key, value


def header_value_problem(value: str) -> str:
    """Why ``value`` cannot be sent as a header value ("" when it can): tab, space, visible ASCII and the Latin-1
    letters 0xA0-0xFF only (RFC 9110, "Field Values", less the C1 controls; Python's client sends values as
    Latin-1). Otherwise every request would fail and be retried for ever, and Python's error text names the whole
    value; the answer never shows the value (it is often a credential), only the offending character's code."""
    for c in value:
        if c == "\t" or " " <= c <= "~" or "\xa0" <= c <= "\xff":
            continue
        if c in "\r\n":
            return "has a line break"
        if c < "\xa0":
            return f"has a control character (U+{ord(c):04X})"
        return f"has a character a header cannot carry (U+{ord(c):04X}, e.g. a typographic dash or quote)"
    return ""


def _colon_hint(text: str) -> str:
    """A hint when ``text`` is written as an HTTP header line (``Name: value``, curl's form); never the value."""
    name, colon, _ = text.partition(":")
    return f" (written as '{name.strip()}: ...'? use {name.strip()}=...)" if colon and _token(name.strip()) else ""


def _token(name: str) -> bool:
    return all((c.isascii() and c.isalnum()) or c in "!#$%&'*+-.^_`|~" for c in name)


def with_path(url: str) -> str:
    """A URL with no path gets ``/v1/metrics``."""
    parts = urllib.parse.urlsplit(url)
    if parts.path in ("", "/"):
        return urllib.parse.urlunsplit(parts._replace(path=METRICS_PATH))
    return url


def base_plus_metrics(url: str) -> str:
    """``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``v1/metrics`` (one slash between)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/") + METRICS_PATH))


def _seconds_from_ms(var: str, value: str) -> float:
    try:
        ms = float(value)
    except ValueError:
        raise SettingsError(f"{var}: expected milliseconds, got {value[:40]!r}") from None
    if not (math.isfinite(ms) and ms > 0):
        raise SettingsError(f"{var}: must be a finite positive number of milliseconds, got {value[:40]!r}")
    return ms / 1000.0


def resolve(
    env: Mapping[str, str],
    endpoint: str | None = None,
    protocol: str | None = None,
    headers: list[tuple[str, str]] | None = None,
    timeout: float | None = None,
    compression: str | None = None,
    certificate: str | None = None,
) -> Connection:
    """The connection settings (see the module docstring); raises ``SettingsError``."""
    c = Connection()
    if endpoint and endpoint.strip():
        c.endpoint = with_path(endpoint.strip())
    elif (metrics := env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "").strip()) != "":
        c.endpoint = with_path(metrics)
    elif (base := env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()) != "":
        c.endpoint = base_plus_metrics(base)
        if urllib.parse.urlsplit(base).path.rstrip("/").endswith(METRICS_PATH):
            c.warnings.append(
                f"OTEL_EXPORTER_OTLP_ENDPOINT is a base URL: {METRICS_PATH} is appended to it, so requests go to"
                f" {urllib.parse.urlsplit(c.endpoint).path}; a full metrics URL goes in"
                " OTEL_EXPORTER_OTLP_METRICS_ENDPOINT or --endpoint"
            )
    if protocol:
        c.protocol = protocol
    elif picked := _pick(env, "PROTOCOL"):
        var, value = picked
        if value == "grpc":
            raise SettingsError(f"{var}=grpc: only OTLP/HTTP is spoken (http/protobuf or http/json)")
        if value not in PROTOCOLS:
            raise SettingsError(f"{var}: expected http/protobuf or http/json, got {value[:40]!r}")
        c.protocol = value
    if picked := _pick(env, "HEADERS"):
        c.headers = parse_headers(picked[1], picked[0])
    for key, value in headers or ():
        c.headers[key] = value
    if timeout is not None:
        c.timeout = timeout
    elif picked := _pick(env, "TIMEOUT"):
        c.timeout = _seconds_from_ms(*picked)
        if c.timeout < SHORT_TIMEOUT:  # "10" meant as seconds: every exchange would time out
            c.warnings.append(
                f"{picked[0]}={picked[1]} is {c.timeout * 1000:g} ms (the variable is in milliseconds; 10000 is 10 s):"
                " most exchanges will time out"
            )
    if compression:
        c.compression = compression
    elif picked := _pick(env, "COMPRESSION"):
        var, value = picked
        if value not in COMPRESSIONS:
            raise SettingsError(f"{var}: expected gzip or none, got {value[:40]!r}")
        c.compression = value
    if certificate:
        c.certificate = certificate
    elif picked := _pick(env, "CERTIFICATE"):
        c.certificate = picked[1]
    if picked := _pick(env, "CLIENT_CERTIFICATE"):
        c.client_certificate = picked[1]
    if picked := _pick(env, "CLIENT_KEY"):
        c.client_key = picked[1]
    if bool(c.client_certificate) != bool(c.client_key):
        raise SettingsError("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY go together")
    return c
