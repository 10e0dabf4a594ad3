"""Type-checked access to the report's info objects (instance, hardware, Kubernetes, daemon health) for shaping.

The metric groups are read through ``neuron_monitor.schema`` instead; these helpers remain for the objects that
are not groups.

Missing keys and JSON ``null`` are normal in real reports (idle latency, absent groups) and read as ``None``;
a value of the wrong type (a string where a number belongs, a list where an object belongs) raises
``MalformedReport`` with the path of the offending value, so the exporter keeps serving the last good report.
"""

from __future__ import annotations

from typing import Any


class MalformedReport(ValueError):
    """A report has the right top-level shape but a wrong type inside; it is skipped as a whole."""


def number(value: Any, where: str) -> float | None:
    """An int or float (not a bool) as float; None for null/missing."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MalformedReport(f"{where}: expected a number, got {type(value).__name__}")
    return float(value)


def mapping(value: Any, where: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MalformedReport(f"{where}: expected an object, got {type(value).__name__}")
    return value


def sequence(value: Any, where: str) -> list[Any] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise MalformedReport(f"{where}: expected an array, got {type(value).__name__}")
    return value


def text(value: Any, where: str) -> str:
    """A label value: strings as is, numbers printed, null as ""; objects and arrays are wrong."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    raise MalformedReport(f"{where}: expected a string, got {type(value).__name__}")
