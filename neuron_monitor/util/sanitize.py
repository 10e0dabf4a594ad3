"""Text from input made safe where it is shown: a terminal, an HTML page, a log line.

Runtime tags (a workload's NEURON_PROCESS_TAG), instance names, error strings and every other string of a report
are written by someone else. On a terminal, control characters in them are commands (ESC[2J clears the screen,
OSC 52 writes the clipboard, OSC 8 makes links, C1 controls do the same in one byte) and bidi controls reorder
what is shown. `sanitize` replaces each such character with one visible character, so text keeps its length (the
top view's layout counts characters) and nothing is lost from sight:

- C0 controls and DEL become their Unicode control pictures (ESC is shown as U+241B, a newline as U+240A);
- C1 controls (U+0080-U+009F), bidi embeddings, overrides, isolates and marks, and the line and paragraph
  separators become U+FFFD.

`html_text` is `sanitize` then HTML escaping, for the exporter's landing page. `url_shown` is a URL for a message
with the password (any user information) it may carry replaced, so that no credential reaches an error line.
`SafeFormatter` is the log formatter of every command: the message of each record is sanitized (a newline from
input cannot forge a log line), a traceback keeps its own newlines.

Apply these where text leaves the program (the terminal writer, the page, the log handler), not where it is read.
"""

from __future__ import annotations

import html
import logging
import re

_C0 = {c: 0x2400 + c for c in range(0x20)}
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029)
_HIDDEN = (*range(0x80, 0xA0), *_BIDI)  # shown as U+FFFD
_TABLE: dict[int, int] = {**_C0, 0x7F: 0x2421, **dict.fromkeys(_HIDDEN, 0xFFFD)}
_UNSAFE = re.compile("[" + "".join(re.escape(chr(c)) for c in sorted(_TABLE)) + "]")
_KEEP_NEWLINES = {k: v for k, v in _TABLE.items() if k != 0x0A}


def sanitize(text: str) -> str:
    """``text`` with every control and bidi character replaced by one visible character (same length)."""
    if _UNSAFE.search(text) is None:
        return text
    return text.translate(_TABLE)


def sanitize_keeping_newlines(text: str) -> str:
    """`sanitize`, but newlines stay (for a traceback of our own code)."""
    if _UNSAFE.search(text) is None:
        return text
    return text.translate(_KEEP_NEWLINES)


def url_shown(url: str) -> str:
    """``url`` with the user information of its authority (``user:password@``) replaced by ``[REDACTED]@``, for an
    error line: a URL a user gave may carry a password, whatever else is wrong with it (scheme, host, port). The
    authority is what follows ``scheme://`` (or the start, when there is none) up to ``/``, ``?`` or ``#``."""
    scheme, sep, rest = url.partition("://")
    head, tail = (scheme + sep, rest) if sep else ("", url)
    end = min((i for i in (tail.find(c) for c in "/?#") if i >= 0), default=len(tail))
    authority = tail[:end]
    if "@" not in authority:
        return url
    return head + "[REDACTED]@" + authority.rpartition("@")[2] + tail[end:]


def html_text(value: object) -> str:
    """``str(value)`` sanitized and HTML-escaped (quotes too), for text and attribute values of a page."""
    return html.escape(sanitize(str(value)))


class SafeFormatter(logging.Formatter):
    """A log formatter whose messages are sanitized (see the module docstring)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return sanitize(super().formatMessage(record))

    def formatException(self, ei: logging._SysExcInfoType) -> str:
        return sanitize_keeping_newlines(super().formatException(ei))
