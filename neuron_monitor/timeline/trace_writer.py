"""A streaming writer of Trace Event Format JSON (the format Perfetto's UI and chrome://tracing open).

Writes ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}`` one event per line as events come,
so memory stays flat however long the trace. It hands out integer pids and tids for named processes and threads
(emitting their ``M`` metadata events once), and keeps each track valid by construction:

- counter events (``C``) carry only finite numbers; a sample equal to the track's previous one is left out (a
  counter holds its value until the next sample, so nothing is lost) and counted in ``unchanged``;
- time never goes back on a track: a counter sample or slice start earlier than the track's last time is moved
  to it and counted in ``clamped``;
- complete slices (``X``) have a non-negative ``dur``.

Times are given in epoch seconds and written as integer microseconds, so traces of several hosts share one clock.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import IO, Any

import orjson

US = 1_000_000


def _us(t: float) -> int:
    return round(t * US)


class TraceWriter:
    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._first = True
        self._pids: dict[Hashable, int] = {}
        self._tids: dict[tuple[int, Hashable], int] = {}
        self._next_tid: dict[int, int] = {}
        self._counter_last: dict[tuple[int, str], tuple[int, dict[str, float]]] = {}
        self._thread_last: dict[tuple[int, int], int] = {}
        self.events = 0
        self.unchanged = 0
        self.clamped = 0
        self._out.write(b'{"traceEvents":[\n')

    def _emit(self, event: dict[str, Any]) -> None:
        if self._first:
            self._first = False
        else:
            self._out.write(b",\n")
        self._out.write(orjson.dumps(event))
        self.events += 1

    # -- processes and threads ------------------------------------------------------------------------------

    def process(self, key: Hashable, name: str, sort_index: int, labels: str = "") -> int:
        """The pid of the trace process ``key``; the first call names it."""
        pid = self._pids.get(key)
        if pid is None:
            pid = self._pids[key] = len(self._pids) + 1
            self._emit({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
            self._emit(
                {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort_index}}
            )
            if labels:
                self._emit({"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": labels}})
        return pid

    def thread(self, pid: int, key: Hashable, name: str, sort_index: int | None = None) -> int:
        """The tid of thread ``key`` in process ``pid``; the first call names it."""
        tid = self._tids.get((pid, key))
        if tid is None:
            tid = self._next_tid.get(pid, 1)
            self._next_tid[pid] = tid + 1
            self._tids[(pid, key)] = tid
            self._emit({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
            if sort_index is not None:
                args = {"sort_index": sort_index}
                self._emit({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": args})
        return tid

    # -- events ---------------------------------------------------------------------------------------------

    def counter(self, pid: int, name: str, t: float, values: dict[str, float | int | None], cat: str) -> bool:
        """One sample of counter track (pid, name); returns whether it was written."""
        clean = {k: v for k, v in values.items() if v is not None and math.isfinite(v)}
        if not clean:
            return False
        ts = _us(t)
        track = (pid, name)
        last = self._counter_last.get(track)
        if last is not None:
            if last[1] == clean:
                self.unchanged += 1
                return False
            if ts < last[0]:
                ts = last[0]
                self.clamped += 1
        self._counter_last[track] = (ts, clean)
        self._emit({"ph": "C", "name": name, "cat": cat, "pid": pid, "tid": 0, "ts": ts, "args": clean})
        return True

    def counter_value(self, pid: int, name: str) -> dict[str, float] | None:
        last = self._counter_last.get((pid, name))
        return last[1] if last is not None else None

    def _thread_ts(self, pid: int, tid: int, ts: int) -> int:
        last = self._thread_last.get((pid, tid))
        if last is not None and ts < last:
            self.clamped += 1
            return last
        return ts

    def complete(
        self,
        pid: int,
        tid: int,
        name: str,
        start: float,
        end: float,
        cat: str,
        args: dict[str, Any],
        cname: str = "",
    ) -> None:
        """A complete slice. Slices on one thread must come in start order and nest (the caller's duty)."""
        ts = self._thread_ts(pid, tid, _us(start))
        dur = max(0, _us(end) - ts)
        self._thread_last[(pid, tid)] = ts
        event: dict[str, Any] = {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
        if args:
            event["args"] = args
        if cname:
            event["cname"] = cname
        self._emit(event)

    def instant(
        self, pid: int, tid: int, name: str, t: float, cat: str, args: dict[str, Any], scope: str = "t"
    ) -> None:
        ts = self._thread_ts(pid, tid, _us(t))
        self._thread_last[(pid, tid)] = ts
        event: dict[str, Any] = {"ph": "i", "s": scope, "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts}
        if args:
            event["args"] = args
        self._emit(event)

    def close(self, other_data: dict[str, Any]) -> None:
        self._out.write(b"\n],\n")
        self._out.write(b'"displayTimeUnit":"ms",\n"otherData":')
        self._out.write(orjson.dumps(other_data))
        self._out.write(b"}\n")
