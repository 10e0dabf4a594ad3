"""CloudWatch Embedded Metric Format: datums -> JSON log events, one per line, for the CloudWatch agent.

Datums sharing a timestamp and a dimension set become one event: the dimension values and metric values are
top-level fields, and ``_aws.CloudWatchMetrics`` declares the namespace, the dimension set and each metric's unit.
Limits kept: at most 100 metrics per directive, at most 30 dimensions per dimension set, at most 100 values per
metric (repeated samples of one series become an array), and events below 256 KB (the conservative reading of the
EMF size limit); an event that would be larger is split.

Destination faults: a reader that went away (EPIPE) raises `EmfDestinationGone` at once, so the exporter exits
non-zero instead of dropping everything; a full disk (ENOSPC, EDQUOT, EFBIG) drops that report's events, counts
them in ``dropped_events`` and warns at most once a minute; the next event then starts on a fresh line, so a
line cut short by the full disk never glues to the next one.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from typing import Any

import orjson

from neuron_monitor.exporters.cloudwatch.datum import Datum, Dims

MAX_METRICS_PER_DIRECTIVE = 100
MAX_DIMENSIONS_PER_SET = 30
MAX_VALUES_PER_METRIC = 100
MAX_EVENT_BYTES = 256 * 1024
DROP_LOG_INTERVAL = 60.0
_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
log = logging.getLogger("neuron_monitor.exporters.cloudwatch.emf")


class EmfDestinationGone(Exception):
    """The EMF destination's reader closed it (EPIPE): nothing more can be delivered."""


def _event(
    namespace: str, timestamp_ms: int, dims: Dims, metrics: list[tuple[str, str, int, list[float]]]
) -> dict[str, Any]:
    directive_metrics: list[dict[str, Any]] = []
    event: dict[str, Any] = {}
    for name, unit, resolution, values in metrics:
        entry: dict[str, Any] = {"Name": name, "Unit": unit}
        if resolution == 1:
            entry["StorageResolution"] = 1
        directive_metrics.append(entry)
        event[name] = values[0] if len(values) == 1 else values
    for name, value in dims:
        event[name] = value
    event["_aws"] = {
        "Timestamp": timestamp_ms,
        "CloudWatchMetrics": [
            {"Namespace": namespace, "Dimensions": [[n for n, _ in dims]], "Metrics": directive_metrics}
        ],
    }
    return event


def _encode_split(
    namespace: str, ts: int, dims: Dims, metrics: list[tuple[str, str, int, list[float]]], out: list[bytes]
) -> None:
    line = orjson.dumps(_event(namespace, ts, dims, metrics), option=orjson.OPT_APPEND_NEWLINE)
    if len(line) <= MAX_EVENT_BYTES or len(metrics) == 1:
        out.append(line)
        return
    half = len(metrics) // 2
    _encode_split(namespace, ts, dims, metrics[:half], out)
    _encode_split(namespace, ts, dims, metrics[half:], out)


def encode_events(datums: list[Datum], namespace: str) -> list[bytes]:
    """EMF lines (newline-terminated) for the given datums."""
    groups: dict[tuple[int, Dims], dict[str, tuple[str, int, list[float]]]] = {}
    for d in datums:
        dims = d.dims[:MAX_DIMENSIONS_PER_SET]
        metrics = groups.setdefault((int(d.timestamp * 1000), dims), {})
        samples = [v for v, c in d.sample_values() for _ in range(int(c))]
        held = metrics.get(d.name)
        if held is None:
            metrics[d.name] = (d.unit, d.resolution, samples)
        else:
            held[2].extend(samples)
    out: list[bytes] = []
    for (ts, dims), metrics in groups.items():
        flat: list[tuple[str, str, int, list[float]]] = []
        for name, (unit, resolution, values) in metrics.items():
            for i in range(0, len(values), MAX_VALUES_PER_METRIC):
                flat.append((name, unit, resolution, values[i : i + MAX_VALUES_PER_METRIC]))
        # a metric name may appear once per directive: chunks of one name go to separate events
        while flat:
            seen: set[str] = set()
            chunk: list[tuple[str, str, int, list[float]]] = []
            rest: list[tuple[str, str, int, list[float]]] = []
            for m in flat:
                if m[0] in seen or len(chunk) >= MAX_METRICS_PER_DIRECTIVE:
                    rest.append(m)
                else:
                    seen.add(m[0])
                    chunk.append(m)
            _encode_split(namespace, ts, dims, chunk, out)
            flat = rest
    return out


class EmfWriter:
    """Writes EMF lines for each report's datums to a file descriptor, one ``write`` call per report."""

    def __init__(self, fd: int, namespace: str, clock: Any = time.monotonic) -> None:
        self._fd = fd
        self.namespace = namespace
        self.events = 0
        self.bytes = 0
        self.dropped_events = 0
        self.write_errors = 0
        self._torn = False  # the last write stopped mid-line: start the next one on a fresh line
        self._clock = clock
        self._last_warning = -1e18

    def write(self, datums: list[Datum]) -> None:
        lines = encode_events(datums, self.namespace)
        if not lines:
            return
        blob = b"".join(lines)
        if self._torn:
            blob = b"\n" + blob
        try:
            self._write_all(blob)
        except OSError as e:
            if e.errno == errno.EPIPE:
                raise EmfDestinationGone("the EMF destination was closed by its reader (broken pipe)") from None
            if e.errno not in _FULL_ERRNOS:
                raise
            self._dropped(len(lines), e)
            return
        self._torn = False
        self.events += len(lines)
        self.bytes += len(blob)

    def _write_all(self, blob: bytes) -> None:
        view = memoryview(blob)
        while view:
            try:
                n = os.write(self._fd, view)
            except OSError:
                if len(view) < len(blob):
                    self._torn = True
                raise
            view = view[n:]

    def _dropped(self, events: int, e: OSError) -> None:
        self.dropped_events += events
        self.write_errors += 1
        now = self._clock()
        if now - self._last_warning >= DROP_LOG_INTERVAL:
            self._last_warning = now
            log.warning(
                "EMF destination full (%s): %d event(s) dropped so far; retrying with the next report",
                e.strerror or e,
                self.dropped_events,
            )
