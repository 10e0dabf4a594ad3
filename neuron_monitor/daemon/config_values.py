"""The values of monitor.conf that both of its validators read (the fast path in `config` and the pydantic models
in `config_models`): durations ("500ms", "1m30s") and their bounds, JSON type names for messages, and
`ConfigError`, the one-line error. It imports neither validator, so they share it without importing each other."""

from __future__ import annotations

import re
from typing import Any

from neuron_monitor.util.inputfile import shown
from neuron_monitor.util.sanitize import sanitize

MIN_PERIOD = 0.01
MAX_PERIOD = 86400.0
MAX_ERROR_CHARS = 400  # an error line never grows with the input

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")  # ASCII digits only


class ConfigError(Exception):
    """A bad configuration; ``str()`` is the one line printed to stderr (at most MAX_ERROR_CHARS), its control and
    bidi characters made visible (a configuration file's strings are someone else's: an ESC in a group name was
    written to the terminal as it was)."""

    def __str__(self) -> str:
        text = sanitize(" ".join(str(self.args[0] if self.args else "").split()))  # one line, whatever it held
        return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def parse_period(text: str) -> float:
    """Parse a Go-style duration ("500ms", "1s", "2m", "1m30s") into seconds; raise ValueError if invalid."""
    if not isinstance(text, str):
        raise ValueError(f'expected a duration string such as "500ms", "1s" or "2m", got {shown(text)}')
    s = text.strip(" \t")
    if not s:
        raise ValueError("empty duration")
    if s.startswith("-"):
        raise ValueError(f"period must be positive, got {shown(text)}")
    s = s.lstrip("+")
    pos = 0
    total = 0.0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if not m:
            raise ValueError(
                f'invalid duration {shown(text)}: expected ASCII digits and a unit (ns, us, ms, s, m, h), e.g. "1s"'
            )
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if total <= 0:
        raise ValueError(f"period must be positive, got {shown(text)}")
    if total < MIN_PERIOD:
        raise ValueError(f"period {shown(text)} is below the minimum of 10ms")
    if total > MAX_PERIOD:
        raise ValueError(f"period {shown(text)} is above the maximum of 24h")
    return total


def json_type(v: Any) -> str:
    """How a message names the JSON value ``v``: "null", "a boolean", "a number (5)", "a string (\"x\")", ..."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int | float):
        return f"a number ({v})"
    if isinstance(v, str):
        return f"a string ({shown(v)})"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__
