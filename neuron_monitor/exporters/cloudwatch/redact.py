"""Keeps AWS credentials out of every log line, at every verbosity (botocore's debug logs print request headers).

`CredentialRedactor` is a logging.Filter installed on the exporter's stderr handler: it formats each record once,
replaces the known secret values (the access key id, secret key and session token of the credentials in use) and
anything shaped like one (access key ids ``AKIA…``/``ASIA…``, the values of ``X-Amz-Security-Token``,
``Authorization`` and ``Signature``, ``aws_secret_access_key``/``aws_session_token`` settings, the user information
``user:password@`` of a URL such as an ``--endpoint-url`` that botocore echoes) by ``[REDACTED]``, and hands on the
redacted text. Key id and token shapes: https://docs.aws.amazon.com/IAM/latest/UserGuide/
reference_identifiers.html (key id prefixes) and https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/
CommonParameters.html (X-Amz-Security-Token).
"""

from __future__ import annotations

import logging
import re

REDACTED = "[REDACTED]"
_PATTERNS = (
    re.compile(r"\b(?:AKIA|ASIA|AROA|AIDA|ANPA|ANVA|APKA)[A-Z0-9]{12,}\b"),
    re.compile(r"(?i)(x-amz-security-token['\"]?\s*[:=,]\s*b?['\"]?)[^'\"\s,&}]+"),
    re.compile(r"(?i)(authorization['\"]?\s*[:=,]\s*b?['\"]?)[^'\"\n}]+"),
    re.compile(r"(?i)(signature=)[0-9a-f]+"),
    re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s@'\"?#]+(?=@)"),  # a URL's user:password (the @ stays)
    re.compile(
        r"(?i)((?:aws_)?(?:secret_access_key|session_token|secret_key|security_token)['\"]?\s*[:=]\s*['\"]?)[^'\"\s,}]+"
    ),
)


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with the given secret values and every credential-shaped substring replaced."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.re.groups else "") + REDACTED, text)
    return text


class CredentialRedactor(logging.Filter):
    """A handler filter that redacts each record's final text (message, arguments and traceback)."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: tuple[str, ...] = ()
        self._headers: list[re.Pattern[str]] = []  # ``name: value`` of the user's own headers, whatever the value

    def add_header_names(self, *names: str) -> None:
        """Also redact the value after each of these header names (``name: value``, ``name=value``, any case), as
        botocore's debug CanonicalRequest shows a signed header: a value too short for `add_secrets` included."""
        for name in names:
            if name:
                self._headers.append(re.compile(rf"(?i)(\b{re.escape(name)}\s*[:=]\s*)[^\s,]+"))

    def add_secrets(self, *values: str | None) -> None:
        """Also redact these literal values (short ones are ignored: they would redact ordinary words)."""
        self.secrets = tuple(sorted({*self.secrets, *(v for v in values if v and len(v) >= 8)}, key=len, reverse=True))

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: keep the raw template only
            message = str(record.msg)
        message = redact(message, self.secrets)
        for pattern in self._headers:
            message = pattern.sub(lambda m: m.group(1) + REDACTED, message)
        record.msg = message
        record.args = None
        if record.exc_info:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info), self.secrets)
            record.exc_info = None
        if record.stack_info:
            record.stack_info = redact(record.stack_info, self.secrets)
        return True
