"""The schema's value readers: one set, one error policy, for every part of a report (group bodies, the envelope,
the info objects).

Each reader takes the value, the ``Problems`` of what is being read, and the path of its parent plus its key. It
never raises: a value of the wrong type is left out (``None``, ``""`` or absent from a map) and recorded as a
problem, a *count* problem when ``counted`` (the value feeds a per-period counter or is part of the envelope),
else a *value* problem; each consumer decides what a problem costs (docs/architecture.md). JSON ``null`` and
missing keys are normal and no problem. The path of a bad value is built only when there is one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

MAX_PROBLEMS = 20  # per Problems object: a hostile report cannot make the reader build megabytes of messages


class Problems:
    """Wrong-typed values found while reading: ``counts`` (a per-period count or the envelope) and ``values``."""

    __slots__ = ("counts", "values")

    def __init__(self) -> None:
        self.counts: list[str] = []
        self.values: list[str] = []

    def __bool__(self) -> bool:
        return bool(self.counts or self.values)

    def bad(self, where: str, key: object, value: object, expected: str, counted: bool) -> None:
        """Record that ``where.key`` holds ``value`` where ``expected`` belongs."""
        target = self.counts if counted else self.values
        if len(target) < MAX_PROBLEMS:
            target.append(f"{where}.{key}: expected {expected}, got {type(value).__name__}")

    def first(self) -> str:
        """The first problem (count problems first), for a log line; "" when there is none."""
        return (self.counts or self.values or [""])[0]


def number(value: Any, problems: Problems, where: str, key: object, counted: bool = False) -> float | None:
    """An int or float (not a bool) as float; None for null/missing or a wrong type (recorded)."""
    cls = value.__class__
    if cls is float:
        return value  # type: ignore[no-any-return]
    if cls is int:
        return float(value)
    if value is None:
        return None
    if cls is not bool and isinstance(value, int | float):
        return float(value)
    problems.bad(where, key, value, "a number", counted)
    return None


def mapping(value: Any, problems: Problems, where: str, key: object, counted: bool = False) -> dict[str, Any] | None:
    """An object; None for null/missing or a wrong type (recorded)."""
    if value.__class__ is dict or isinstance(value, dict):
        return value
    if value is not None:
        problems.bad(where, key, value, "an object", counted)
    return None


def sequence(value: Any, problems: Problems, where: str, key: object, counted: bool = False) -> list[Any] | None:
    """An array; None for null/missing or a wrong type (recorded)."""
    if isinstance(value, list):
        return value
    if value is not None:
        problems.bad(where, key, value, "an array", counted)
    return None


def text(value: Any, problems: Problems, where: str, key: object, counted: bool = False) -> str:
    """A label value: strings as is, numbers printed, null as ""; objects and arrays are wrong ("" , recorded)."""
    if value.__class__ is str or isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    problems.bad(where, key, value, "a string", counted)
    return ""


def numbers(value: Any, problems: Problems, where: str, key: str, counted: bool = False) -> dict[str, float] | None:
    """An object of numbers (``{"user": 1.5, ...}``): nulls left out, wrong types left out and recorded. When every
    value is an int or float the object itself is returned (read-only, like every value the reader returns)."""
    obj = mapping(value, problems, where, key, counted)
    if obj is None:
        return None
    for v in obj.values():
        cls = v.__class__
        if cls is not int and cls is not float:
            break
    else:
        return obj
    out: dict[str, float] = {}
    for k, v in obj.items():
        cls = v.__class__
        if cls is float or cls is int:
            out[k] = v
        elif v is not None:
            n = number(v, problems, f"{where}.{key}", k, counted)
            if n is not None:
                out[k] = n
    return out


def index(value: Any) -> int | None:
    """A non-negative index from an int or a decimal string ("3"), else None (no problem recorded)."""
    if value.__class__ is int:
        return value if value >= 0 else None
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def entries(
    body: dict[str, Any], key: str, problems: Problems, where: str, read_entry: Callable[[Any, Problems, str], T | None]
) -> list[T]:
    """The array ``body[key]`` (a count problem when it is not one), each element read by ``read_entry(element,
    problems, path)`` with the element's path ``where.key[i]``; elements it returns None for are left out."""
    listed = sequence(body.get(key), problems, where, key, counted=True) or ()
    out: list[T] = []
    for i, raw in enumerate(listed):
        entry = read_entry(raw, problems, f"{where}.{key}[{i}]")
        if entry is not None:
            out.append(entry)
    return out


def indexed(raw: Any, problems: Problems, where: str, key: str) -> tuple[dict[str, Any], str, int | None]:
    """An array element that names itself by an index under ``key`` (a device by ``neuron_device_index``): the
    object (``{}`` when it is not one, a count problem), the index as a label (``text``, counted) and as a number
    (``index``)."""
    obj = mapping(raw, problems, where, "", counted=True) or {}
    raw_index = obj.get(key)
    return obj, text(raw_index, problems, where, key, counted=True), index(raw_index)
