"""OTLP/HTTP JSON (``--protocol http/json``): the same request as ``wire``, in the Protobuf JSON mapping.

As the OTLP specification's "JSON Protobuf Encoding" asks (opentelemetry-proto ``docs/specification.md``): keys are
the fields' lowerCamelCase JSON names, enum values are integers (``aggregationTemporality: 2``), 64-bit integers
are decimal strings (``timeUnixNano``), a non-finite double is the string ``NaN``, ``Infinity`` or ``-Infinity``
(proto3's JSON mapping), and the body is sent as ``application/json``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import orjson

from neuron_monitor.exporters.otlp.model import Labels, MetricOut, Pairs, labels_items
from neuron_monitor.exporters.otlp.wire import ATTR_CACHE_LIMIT, CUMULATIVE

Json = dict[str, Any]


def _attributes(pairs: Pairs) -> list[Json]:
    return [{"key": k, "value": {"stringValue": v}} for k, v in pairs]


def _double(value: float) -> float | str:
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


class JsonEncoder:
    """Requests of one report as OTLP/JSON bytes, split like ``ProtobufEncoder`` (by data points, at about
    ``max_bytes`` of JSON)."""

    content_type = "application/json"

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._attrs: dict[Labels, bytes] = {}

    def _point_attrs(self, labels: Labels) -> bytes:
        cached = self._attrs.get(labels)
        if cached is None:
            if len(self._attrs) >= ATTR_CACHE_LIMIT:
                self._attrs.clear()
            cached = orjson.dumps(_attributes(labels_items(labels)))
            self._attrs[labels] = cached
        return cached

    def _point(self, labels: Labels, value: float, start: int, time_ns: str, summed: bool) -> bytes:
        start_part = b'"startTimeUnixNano":"%d",' % start if summed else b""
        return (
            b'{"attributes":'
            + self._point_attrs(labels)
            + b","
            + start_part
            + b'"timeUnixNano":"'
            + time_ns.encode()
            + b'","asDouble":'
            + orjson.dumps(_double(value))
            + b"}"
        )

    def _metric(self, metric: MetricOut, points: list[bytes]) -> bytes:
        head: Json = {"name": metric.name}
        if metric.description:
            head["description"] = metric.description
        if metric.unit:
            head["unit"] = metric.unit
        data = b'{"dataPoints":[' + b",".join(points) + b"]"
        if metric.monotonic:
            body = b'"sum":' + data + b',"aggregationTemporality":%d,"isMonotonic":true}' % CUMULATIVE
        elif metric.updown:
            body = b'"sum":' + data + b',"aggregationTemporality":%d,"isMonotonic":false}' % CUMULATIVE
        else:
            body = b'"gauge":' + data + b"}"
        return orjson.dumps(head)[:-1] + b"," + body + b"}"

    def encode(
        self, resource: Pairs, scope: tuple[str, str], metrics: Sequence[MetricOut], time_ns: int
    ) -> list[tuple[bytes, int]]:
        head = orjson.dumps({"attributes": _attributes(resource)})
        scope_part = orjson.dumps({"name": scope[0], "version": scope[1]})
        room = max(self.max_bytes - len(head) - len(scope_part) - 128, 1024)
        stamp = str(time_ns)
        requests: list[tuple[bytes, int]] = []
        batch: list[bytes] = []
        size = count = 0

        def flush() -> None:
            requests.append(
                (
                    b'{"resourceMetrics":[{"resource":'
                    + head
                    + b',"scopeMetrics":[{"scope":'
                    + scope_part
                    + b',"metrics":['
                    + b",".join(batch)
                    + b"]}]}]}",
                    count,
                )
            )

        for metric in metrics:
            points: list[bytes] = []
            psize = 0
            for labels, value, start in metric.points:
                point = self._point(labels, value, start, stamp, metric.monotonic or metric.updown)
                if points and psize + len(point) > room:
                    chunk = self._metric(metric, points)
                    if batch and size + len(chunk) > room:
                        flush()
                        batch, size, count = [], 0, 0
                    batch.append(chunk)
                    size += len(chunk) + 1
                    count += len(points)
                    points, psize = [], 0
                points.append(point)
                psize += len(point) + 1
            if points:
                chunk = self._metric(metric, points)
                if batch and size + len(chunk) > room:
                    flush()
                    batch, size, count = [], 0, 0
                batch.append(chunk)
                size += len(chunk) + 1
                count += len(points)
        if batch or not requests:
            flush()
        return requests


def partial_success(body: bytes) -> tuple[int, str]:
    """(rejectedDataPoints, errorMessage) of a JSON ExportMetricsServiceResponse; raises ValueError when the body is
    not one."""
    try:
        doc = orjson.loads(body) if body.strip() else {}
    except orjson.JSONDecodeError as e:
        raise ValueError(f"not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    partial = doc.get("partialSuccess") or doc.get("partial_success") or {}
    if not isinstance(partial, dict):
        raise ValueError("partialSuccess is not an object")
    raw = partial.get("rejectedDataPoints", partial.get("rejected_data_points", 0))
    try:
        rejected = int(raw or 0)
    except (TypeError, ValueError):
        raise ValueError("rejectedDataPoints is not an integer") from None
    message = partial.get("errorMessage", partial.get("error_message", ""))
    return rejected, message if isinstance(message, str) else ""
