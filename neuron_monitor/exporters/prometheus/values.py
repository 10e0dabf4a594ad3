"""The Prometheus exporter's policy on the schema's value readers, for the parts of a report it shapes directly (the
daemon's own health object; the info objects are typed by the schema, see schema/info.py).

The readers themselves are the schema's (`neuron_monitor.schema.values`: one set for every consumer); this module
only applies the exporter's policy to them: a value of the wrong type (a string where a number belongs, a list
where an object belongs) raises ``MalformedReport`` with the path of the offending value, so the exporter keeps
serving the last good report. Missing keys and JSON ``null`` are normal in real reports and read as ``None``
(``""`` for text). ``where`` is the full path of the value, e.g. ``neuron_hardware_info.neuron_device_count``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from neuron_monitor.schema import values as V

T = TypeVar("T")


class MalformedReport(ValueError):
    """A report has the right top-level shape but a wrong type inside; it is skipped as a whole."""


def _strict(reader: Callable[[Any, V.Problems, str, object], T], value: Any, where: str) -> T:
    problems = V.Problems()
    parent, _, key = where.rpartition(".")
    out = reader(value, problems, parent, key)
    if problems:
        message = problems.first()  # "<parent>.<key>: expected ..., got ..."
        raise MalformedReport(message if parent else message[1:])
    return out


def number(value: Any, where: str) -> float | None:
    """An int or float (not a bool) as float; None for null/missing."""
    return _strict(V.number, value, where)


def mapping(value: Any, where: str) -> dict[str, Any] | None:
    """An object; None for null/missing."""
    return _strict(V.mapping, value, where)


def sequence(value: Any, where: str) -> list[Any] | None:
    """An array; None for null/missing."""
    return _strict(V.sequence, value, where)


def text(value: Any, where: str) -> str:
    """A label value: strings as is, numbers printed, null as ""; objects and arrays are wrong."""
    return _strict(V.text, value, where)
