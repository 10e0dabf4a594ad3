"""Tag filters (``neuron_runtimes[].tag_filter``) compiled for RE2: matching time is linear in the tag's length.

Workloads choose their own tags, so a filter run by a backtracking engine (Python's ``re``) can be made to take
exponential time: ``(a+)+$`` against 53 characters of ``a`` stalls the daemon, its reports and its signals. RE2
(https://github.com/google/re2, the engine behind Go's ``regexp`` and Prometheus's label matchers) guarantees
time linear in the input and parses without recursion, so deep nesting cannot overflow a stack either. Its syntax
is Go's, AWS's tag filters are written for it; the few constructs it refuses (backreferences, look-around) are
refused here with one line. A pattern longer than MAX_PATTERN_CHARS or needing more than MAX_PROGRAM_BYTES of
compiled program is refused too.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

from neuron_monitor.util.inputfile import shown

_re2: Any = importlib.import_module("re2")  # google-re2 (typed through TagFilter below)

MAX_PATTERN_CHARS = 4096
MAX_PROGRAM_BYTES = 8 << 20  # RE2's own default; a pattern needing more is refused


class TagFilter(Protocol):
    """A compiled tag filter: ``search(tag)`` is truthy when the tag matches anywhere (Go's MatchString)."""

    @property
    def pattern(self) -> str: ...

    def search(self, text: str) -> object: ...


def compile_tag_filter(pattern: str) -> TagFilter:
    """Compile ``pattern`` with RE2; ValueError with a one-line reason when RE2 cannot take it."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"regular expression longer than {MAX_PATTERN_CHARS} characters ({len(pattern)})")
    options = _re2.Options()
    options.log_errors = False  # RE2 would print to stderr; the caller reports one line instead
    options.max_mem = MAX_PROGRAM_BYTES
    try:
        compiled: TagFilter = _re2.compile(pattern, options)
    except _re2.error as e:
        why = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise ValueError(f"invalid regular expression {shown(pattern)} (RE2 syntax): {why[:120]}") from None
    return compiled
