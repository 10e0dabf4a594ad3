"""Label value length cap: no report string can be amplified into every series of a scrape.

A report's strings become label values (instance name, runtime tag, model names, pod names) or label values are
taken from its object keys, and one label value is repeated on up to thousands of series: a 1 MiB
``instance_name`` made a 438 MB scrape. ``cap_strings`` walks a parsed report once, in place, and shortens every
string value and object key longer than the cap to ``cap`` characters ending in ``TRUNCATION_MARKER``. The cap is
``--max-label-length`` (default 1024 characters; 0 turns it off). Each shortened string is counted as
``neuron_exporter_bad_input_total{reason="label_too_long"}``.

Walking a trn2.48xlarge report costs about as much as shaping it, and real reports have no such strings, so a
report is shaped first and ``LabelGuard`` looks at the label values its families carry: only the series that
are new since the previous report (per family), in one pass over their strings. Only when one of them is
longer than the cap is the report walked and shortened (``cap_strings``) and shaped again.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from neuron_monitor.exporters.prometheus.families import Family

DEFAULT_MAX_LABEL_LENGTH = 1024
TRUNCATION_MARKER = "...[truncated]"


def truncate(value: str, limit: int) -> str:
    """``value`` cut to ``limit`` characters, the last of them the marker (or the marker's head)."""
    keep = max(limit - len(TRUNCATION_MARKER), 0)
    return (value[:keep] + TRUNCATION_MARKER)[:limit]


def cap_strings(report: dict[str, Any], limit: int) -> int:
    """Shorten, in place, every string (value or key) of ``report`` longer than ``limit``; the count shortened."""
    shortened = 0
    stack: list[Any] = [report]
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        if node.__class__ is dict:
            long_keys = None
            for key, value in node.items():
                if len(key) > limit:
                    long_keys = [*(long_keys or []), key]
                cls = value.__class__
                if cls is str:
                    if len(value) > limit:
                        node[key] = truncate(value, limit)
                        shortened += 1
                elif cls is dict or cls is list:
                    push(value)
            if long_keys:
                for key in long_keys:
                    node[truncate(key, limit)] = node.pop(key)
                    shortened += 1
        else:  # a list
            for i, value in enumerate(node):
                cls = value.__class__
                if cls is str:
                    if len(value) > limit:
                        node[i] = truncate(value, limit)
                        shortened += 1
                elif cls is dict or cls is list:
                    push(value)
    return shortened


class LabelGuard:
    """Whether a report's families carry a label value longer than the cap (see the module docstring)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._checked: dict[str, list[tuple[str, ...]]] = {}  # family -> its series at the last check that passed

    def too_long(self, families: Iterable[Family]) -> bool:
        if self.limit <= 0:
            return False
        checked = self._checked
        for fam in families:
            keys = list(fam.samples)
            if checked.get(fam.name) == keys:
                continue
            if keys and keys[0] and max(map(len, chain.from_iterable(keys))) > self.limit:
                return True
            checked[fam.name] = keys
        return False
