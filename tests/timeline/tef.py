"""A checker of Trace Event Format JSON (the Google "Trace Event Format" document, as Perfetto imports it).

``check_trace(path)`` parses the file strictly (no NaN/Infinity), and returns the events after checking:

- the JSON object form: ``traceEvents`` list, optional ``displayTimeUnit`` ("ms" or "ns"), ``otherData`` object;
- required fields per phase: every event ``ph`` and ``pid``/``tid`` integers; non-metadata events ``name`` and a
  numeric ``ts``; ``X`` a numeric ``dur`` >= 0; ``C`` an ``args`` object of finite numbers; ``i``/``I`` a scope
  ``s`` in g/p/t when present; ``M`` a known metadata name with its argument (name / sort_index / labels);
- time order per track in file order: thread events (B/E/X/i) per (pid, tid), counters per (pid, name, id);
- ``B``/``E`` pairs match per thread (stack order, same name when the E names one) and none stays open;
- ``X`` slices on one thread nest properly (a slice starting inside another ends inside it).

Raises ``TraceFormatError`` with the first problem found.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

PHASES = set("BEXiICMbensftPOND") | {"(", ")"}
METADATA_ARGS = {
    "process_name": "name",
    "process_labels": "labels",
    "process_sort_index": "sort_index",
    "thread_name": "name",
    "thread_sort_index": "sort_index",
    "process_uptime_seconds": "uptime",
}


class TraceFormatError(AssertionError):
    pass


def _reject_constant(name: str) -> Any:
    raise TraceFormatError(f"non-standard JSON constant {name}")


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def load(path: Path | str) -> dict[str, Any]:
    with open(path, "rb") as f:
        doc = json.loads(f.read(), parse_constant=_reject_constant)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceFormatError("not a JSON object with a traceEvents list")
    if doc.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        raise TraceFormatError(f"bad displayTimeUnit {doc['displayTimeUnit']!r}")
    if "otherData" in doc and not isinstance(doc["otherData"], dict):
        raise TraceFormatError("otherData is not an object")
    return doc


def check_events(events: list[Any]) -> None:
    thread_last: dict[tuple[int, int], float] = {}
    counter_last: dict[tuple[int, str, Any], float] = {}
    stacks: dict[tuple[int, int], list[tuple[str, float]]] = {}  # open B events
    x_ends: dict[tuple[int, int], list[float]] = {}  # ends of the open X slices per thread
    for n, e in enumerate(events):
        where = f"event {n} ({e!r:.200})"
        if not isinstance(e, dict):
            raise TraceFormatError(f"{where}: not an object")
        ph = e.get("ph")
        if ph not in PHASES:
            raise TraceFormatError(f"{where}: unknown phase {ph!r}")
        if not isinstance(e.get("pid"), int) or isinstance(e.get("pid"), bool):
            raise TraceFormatError(f"{where}: pid is not an integer")
        if "tid" in e and (not isinstance(e["tid"], int) or isinstance(e["tid"], bool)):
            raise TraceFormatError(f"{where}: tid is not an integer")
        if not isinstance(e.get("name"), str) or not e["name"]:
            raise TraceFormatError(f"{where}: no name")
        if "args" in e and not isinstance(e["args"], dict):
            raise TraceFormatError(f"{where}: args is not an object")
        if ph == "M":
            key = METADATA_ARGS.get(e["name"])
            if key is None:
                raise TraceFormatError(f"{where}: unknown metadata event {e['name']!r}")
            if key not in e.get("args", {}):
                raise TraceFormatError(f"{where}: metadata without args.{key}")
            if key == "sort_index" and not isinstance(e["args"][key], int):
                raise TraceFormatError(f"{where}: sort_index is not an integer")
            if e["name"].startswith("thread_") and "tid" not in e:
                raise TraceFormatError(f"{where}: thread metadata without tid")
            continue
        if not _is_num(e.get("ts")):
            raise TraceFormatError(f"{where}: ts is not a finite number")
        ts = float(e["ts"])
        if ph == "C":
            args = e.get("args")
            if not args or not all(_is_num(v) for v in args.values()):
                raise TraceFormatError(f"{where}: counter args must be a non-empty object of numbers")
            track = (e["pid"], e["name"], e.get("id"))
            if ts < counter_last.get(track, -math.inf):
                raise TraceFormatError(f"{where}: counter track {track} goes back in time")
            counter_last[track] = ts
            continue
        if ph in "BEXiI":
            if "tid" not in e:
                raise TraceFormatError(f"{where}: no tid")
            thread = (e["pid"], e["tid"])
            if ts < thread_last.get(thread, -math.inf):
                raise TraceFormatError(f"{where}: thread {thread} goes back in time")
            thread_last[thread] = ts
        if ph in "iI" and e.get("s", "t") not in ("g", "p", "t"):
            raise TraceFormatError(f"{where}: bad instant scope {e.get('s')!r}")
        if ph == "B":
            stacks.setdefault(thread, []).append((e["name"], ts))
        elif ph == "E":
            stack = stacks.get(thread)
            if not stack:
                raise TraceFormatError(f"{where}: E without an open B on {thread}")
            name, _ = stack.pop()
            if e.get("name") and e["name"] != name:
                raise TraceFormatError(f"{where}: E named {e['name']!r} closes B named {name!r}")
        elif ph == "X":
            if not _is_num(e.get("dur")) or e["dur"] < 0:
                raise TraceFormatError(f"{where}: X without a non-negative dur")
            ends = x_ends.setdefault(thread, [])
            while ends and ends[-1] <= ts:
                ends.pop()
            end = ts + float(e["dur"])
            if ends and end > ends[-1]:
                raise TraceFormatError(f"{where}: X slice overlaps the slice it starts in on {thread}")
            ends.append(end)
    for thread, stack in stacks.items():
        if stack:
            raise TraceFormatError(f"thread {thread}: {len(stack)} B event(s) never ended ({stack[-1][0]!r})")


def check_trace(path: Path | str) -> list[dict[str, Any]]:
    doc = load(path)
    check_events(doc["traceEvents"])
    return doc["traceEvents"]


def process_names(events: list[dict[str, Any]]) -> dict[int, str]:
    return {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}


def thread_names(events: list[dict[str, Any]]) -> dict[tuple[int, int], str]:
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}


def counters(events: list[dict[str, Any]], process: str | None = None) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """Counter samples by "process name/counter name" (or counter name only within ``process``)."""
    names = process_names(events)
    out: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for e in events:
        if e["ph"] != "C":
            continue
        pname = names.get(e["pid"], "?")
        if process is not None and pname != process:
            continue
        key = e["name"] if process is not None else f"{pname}/{e['name']}"
        out.setdefault(key, []).append((e["ts"], e["args"]))
    return out
