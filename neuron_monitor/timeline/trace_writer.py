"""A streaming writer of Trace Event Format JSON (the format Perfetto's UI and chrome://tracing open).

Writes ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}`` one event per line as events come,
so memory stays flat however long the trace. It hands out integer pids and tids for named processes and threads
(emitting their ``M`` metadata events once), and keeps each track valid by construction:

- counter events (``C``) carry only finite numbers; a sample equal to the track's previous one is left out (a
  counter holds its value until the next sample, so nothing is lost) and counted in ``unchanged``;
- time never goes back on a track: a counter sample or slice start earlier than the track's last time is moved
  to it and counted in ``clamped``;
- complete slices (``X``) have a non-negative ``dur``;
- every string (process, thread, track and slice names, argument keys and values, ``otherData``) is sanitized
  (`neuron_monitor.util.sanitize`): a runtime tag, model name or instance id from a report reaches the viewer's
  track list and details with each control or bidi character shown as one visible character, never as a
  control (JSON escaping alone keeps the file valid, but the viewer shows the decoded text).

With a ``resolution`` (seconds), counter samples are averaged per track over windows of that length and written
at the window's start (a 24-hour recording at 1 s becomes a trace Perfetto opens quickly); an ``exact`` sample
(a track dropping to 0 when its runtime ends) ends the window early and is written as is.

Times are given in epoch seconds and written as integer microseconds, so traces of several hosts share one clock.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

import orjson

from neuron_monitor.util.sanitize import sanitize

US = 1_000_000


def _us(t: float) -> int:
    return round(t * US)


def _clean(value: Any) -> Any:
    """``value`` (a JSON value) with every string in it, keys included, sanitized."""
    if isinstance(value, str):
        return sanitize(value)
    if isinstance(value, dict):
        return {sanitize(k) if isinstance(k, str) else k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


@dataclass
class _Window:
    index: int
    cat: str
    sums: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    ints: bool = True


class TraceWriter:
    def __init__(self, out: IO[bytes], resolution: float = 0.0) -> None:
        if resolution < 0:
            raise ValueError("resolution must not be negative")
        self._out = out
        self.resolution = resolution
        self._windows: dict[tuple[int, str], _Window] = {}
        self._first = True
        self._pids: dict[Hashable, int] = {}
        self._tids: dict[tuple[int, Hashable], int] = {}
        self._next_tid: dict[int, int] = {}
        self._counter_last: dict[tuple[int, str], tuple[int, dict[str, float]]] = {}
        self._thread_last: dict[tuple[int, int], int] = {}
        self.events = 0
        self.unchanged = 0
        self.clamped = 0
        self._shown: dict[str, str] = {}  # counter track names and series keys, sanitized (as many as tracks)
        self._out.write(b'{"traceEvents":[\n')

    def _emit(self, event: dict[str, Any]) -> None:
        if self._first:
            self._first = False
        else:
            self._out.write(b",\n")
        self._out.write(orjson.dumps(event))
        self.events += 1

    def _text(self, text: str) -> str:
        """``text`` sanitized, remembered (the counter names and keys repeat in every sample)."""
        shown = self._shown.get(text)
        if shown is None:
            shown = self._shown[text] = sanitize(text)
        return shown

    # -- processes and threads ------------------------------------------------------------------------------

    def process(self, key: Hashable, name: str, sort_index: int, labels: str = "") -> int:
        """The pid of the trace process ``key``; the first call names it."""
        pid = self._pids.get(key)
        if pid is None:
            pid = self._pids[key] = len(self._pids) + 1
            name = sanitize(name)
            self._emit({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
            self._emit(
                {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort_index}}
            )
            if labels:
                args = {"labels": sanitize(labels)}
                self._emit({"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": args})
        return pid

    def thread(self, pid: int, key: Hashable, name: str, sort_index: int | None = None) -> int:
        """The tid of thread ``key`` in process ``pid``; the first call names it."""
        tid = self._tids.get((pid, key))
        if tid is None:
            tid = self._next_tid.get(pid, 1)
            self._next_tid[pid] = tid + 1
            self._tids[(pid, key)] = tid
            name = sanitize(name)
            self._emit({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
            if sort_index is not None:
                args = {"sort_index": sort_index}
                self._emit({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": args})
        return tid

    # -- events ---------------------------------------------------------------------------------------------

    def counter(
        self, pid: int, name: str, t: float, values: Mapping[str, float | None], cat: str, exact: bool = False
    ) -> bool:
        """One sample of counter track (pid, name); returns whether it was written (or taken into a window)."""
        clean = {self._text(k): v for k, v in values.items() if v is not None and math.isfinite(v)}
        if not clean:
            return False
        track = (pid, self._text(name))
        if self.resolution > 0:
            window = self._windows.get(track)
            index = math.floor(t / self.resolution)
            if window is not None and (exact or window.index != index):
                self._flush(track, self._windows.pop(track))
                window = None
            if not exact:
                if window is None:
                    window = self._windows[track] = _Window(index, cat)
                for k, v in clean.items():
                    window.sums[k] = window.sums.get(k, 0) + v
                    window.counts[k] = window.counts.get(k, 0) + 1
                    window.ints = window.ints and type(v) is int
                return True
        return self._write(track, _us(t), clean, cat)

    def _flush(self, track: tuple[int, str], w: _Window) -> None:
        means: dict[str, float | int] = {}
        for k, total in w.sums.items():
            mean = total / w.counts[k]
            means[k] = round(mean) if w.ints else round(mean, 4)
        self._write(track, _us(w.index * self.resolution), means, w.cat)

    def _write(self, track: tuple[int, str], ts: int, clean: dict[str, float | int], cat: str) -> bool:
        last = self._counter_last.get(track)
        if last is not None:
            if last[1] == clean:
                self.unchanged += 1
                return False
            if ts < last[0]:
                ts = last[0]
                self.clamped += 1
        self._counter_last[track] = (ts, clean)
        self._emit({"ph": "C", "name": track[1], "cat": cat, "pid": track[0], "tid": 0, "ts": ts, "args": clean})
        return True

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
        event: dict[str, Any] = {"ph": "X", "name": sanitize(name), "cat": cat, "pid": pid, "tid": tid, "ts": ts}
        event["dur"] = dur
        if args:
            event["args"] = _clean(args)
        if cname:
            event["cname"] = cname
        self._emit(event)

    def instant(
        self, pid: int, tid: int, name: str, t: float, cat: str, args: dict[str, Any], scope: str = "t"
    ) -> None:
        ts = self._thread_ts(pid, tid, _us(t))
        self._thread_last[(pid, tid)] = ts
        event: dict[str, Any] = {"ph": "i", "s": scope, "name": sanitize(name), "cat": cat, "pid": pid, "tid": tid}
        event["ts"] = ts
        if args:
            event["args"] = _clean(args)
        self._emit(event)

    def close(self, other_data: dict[str, Any]) -> None:
        for track, window in self._windows.items():
            self._flush(track, window)
        self._windows.clear()
        self._out.write(b"\n],\n")
        self._out.write(b'"displayTimeUnit":"ms",\n"otherData":')
        self._out.write(orjson.dumps(_clean(other_data)))
        self._out.write(b"}\n")
