"""CloudWatch Embedded Metric Format: datums -> JSON log events, one per line, for the CloudWatch agent.

Datums sharing a timestamp and a dimension set become one event: the dimension values and metric values are
top-level fields, and ``_aws.CloudWatchMetrics`` declares the namespace, the dimension set and each metric's unit.
Limits kept: at most 100 metrics per directive, at most 30 dimensions per dimension set, at most 100 values per
metric (repeated samples of one series become an array), and events below 256 KB (the conservative reading of the
EMF size limit); an event that would be larger is split.
"""

from __future__ import annotations

from typing import Any, BinaryIO

import orjson

from neuron_monitor.exporters.cloudwatch.datum import Datum, Dims

MAX_METRICS_PER_DIRECTIVE = 100
MAX_DIMENSIONS_PER_SET = 30
MAX_VALUES_PER_METRIC = 100
MAX_EVENT_BYTES = 256 * 1024


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
    """Writes EMF lines for each report's datums to a binary file object, flushing after each report."""

    def __init__(self, fileobj: BinaryIO, namespace: str) -> None:
        self._f = fileobj
        self.namespace = namespace
        self.events = 0
        self.bytes = 0

    def write(self, datums: list[Datum]) -> None:
        lines = encode_events(datums, self.namespace)
        if not lines:
            return
        blob = b"".join(lines)
        self._f.write(blob)
        self._f.flush()
        self.events += len(lines)
        self.bytes += len(blob)
