"""OTLP/HTTP binary protobuf: the ``ExportMetricsServiceRequest`` of one report, written field by field.

The messages are those of opentelemetry-proto (``opentelemetry/proto/collector/metrics/v1/metrics_service.proto``,
``metrics/v1/metrics.proto``, ``common/v1/common.proto``, ``resource/v1/resource.proto``); the encoding is
protobuf's wire format (https://protobuf.dev/programming-guides/encoding/): a tag is ``field << 3 | wire type``,
LEN fields (type 2) carry a varint length, fixed64 and double fields (type 1) eight little-endian bytes.

Why not the generated classes: building the same request with ``opentelemetry-proto``'s classes (the upb backend)
costs 6.5 ms per trn2.48xlarge report, five times the Prometheus exporter's whole ingest. Here a series' attribute
bytes are built once and kept (labels rarely change from report to report), so a report costs one small
``struct.pack`` per data point. The test suite decodes every request with the official classes.

Fields written: ExportMetricsServiceRequest.resource_metrics (1); ResourceMetrics.resource (1), .scope_metrics (2);
Resource.attributes (1); ScopeMetrics.scope (1), .metrics (2); InstrumentationScope.name (1), .version (2);
Metric.name (1), .description (2), .unit (3), .gauge (5), .sum (7); Gauge.data_points (1); Sum.data_points (1),
.aggregation_temporality (2, CUMULATIVE = 2), .is_monotonic (3); NumberDataPoint.attributes (7),
.start_time_unix_nano (2, fixed64), .time_unix_nano (3, fixed64), .as_double (4, double); KeyValue.key (1),
.value (2); AnyValue.string_value (1).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

from neuron_monitor.exporters.otlp.model import Labels, MetricOut, Pairs, labels_items

CUMULATIVE = 2  # AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
ATTR_CACHE_LIMIT = 200_000  # kept attribute encodings (cleared past it: the cache is a speed-up, never state)

_gauge_point = struct.Struct("<BQBd").pack  # time_unix_nano (3), as_double (4)
_sum_point = struct.Struct("<BQBQBd").pack  # start_time_unix_nano (2), time_unix_nano (3), as_double (4)
_SUM_TAIL = b"\x10\x02\x18\x01"  # aggregation_temporality = CUMULATIVE, is_monotonic = true
_UPDOWN_TAIL = b"\x10\x02"  # aggregation_temporality = CUMULATIVE (is_monotonic false: its default)


def varint(n: int) -> bytes:
    """A non-negative integer as a protobuf varint."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field_bytes(number: int, payload: bytes) -> bytes:
    """A LEN field: tag, length, payload."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def key_value(key: str, value: str) -> bytes:
    """A KeyValue with a string AnyValue."""
    return field_bytes(1, key.encode()) + field_bytes(2, field_bytes(1, value.encode()))


def attributes(field: int, attrs: Pairs) -> bytes:
    """The repeated KeyValue field ``field`` for ``attrs`` (key, value) pairs."""
    return b"".join(field_bytes(field, key_value(k, v)) for k, v in attrs)


class ProtobufEncoder:
    """Requests of one report as bytes, each at most about ``max_bytes`` (a metric whose points alone pass the cap
    is split across requests, under the same name)."""

    content_type = "application/x-protobuf"

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._attrs: dict[Labels, bytes] = {}

    def _point_attrs(self, attrs: Labels) -> bytes:
        cached = self._attrs.get(attrs)
        if cached is None:
            if len(self._attrs) >= ATTR_CACHE_LIMIT:
                self._attrs.clear()
            cached = attributes(7, labels_items(attrs))
            self._attrs[attrs] = cached
        return cached

    def _points(self, metric: MetricOut, time_ns: int) -> Iterator[bytes]:
        """Each data point as a ``data_points`` (1) field."""
        point_attrs = self._point_attrs
        if metric.monotonic or metric.updown:
            for attrs, value, start in metric.points:
                body = point_attrs(attrs) + _sum_point(0x11, start, 0x19, time_ns, 0x21, value)
                yield b"\x0a" + varint(len(body)) + body
        else:
            for attrs, value, _ in metric.points:
                body = point_attrs(attrs) + _gauge_point(0x19, time_ns, 0x21, value)
                yield b"\x0a" + varint(len(body)) + body

    def _metric(self, metric: MetricOut, points: Sequence[bytes]) -> bytes:
        head = field_bytes(1, metric.name.encode())
        if metric.description:
            head += field_bytes(2, metric.description.encode())
        if metric.unit:
            head += field_bytes(3, metric.unit.encode())
        data = b"".join(points)
        if metric.monotonic:
            return head + field_bytes(7, data + _SUM_TAIL)
        if metric.updown:
            return head + field_bytes(7, data + _UPDOWN_TAIL)
        return head + field_bytes(5, data)

    def _metric_chunks(self, metric: MetricOut, time_ns: int, room: int) -> Iterator[tuple[bytes, int]]:
        """The metric as ``metrics`` (2) fields of at most ``room`` bytes of points each, with their point counts."""
        points: list[bytes] = []
        size = 0
        for point in self._points(metric, time_ns):
            if points and size + len(point) > room:
                yield field_bytes(2, self._metric(metric, points)), len(points)
                points, size = [], 0
            points.append(point)
            size += len(point)
        if points:
            yield field_bytes(2, self._metric(metric, points)), len(points)

    def encode(
        self, resource: Pairs, scope: tuple[str, str], metrics: Sequence[MetricOut], time_ns: int
    ) -> list[tuple[bytes, int]]:
        """The report's requests (one unless it passes ``max_bytes``), each with its number of data points."""
        head = field_bytes(1, attributes(1, resource)) if resource else field_bytes(1, b"")
        scope_field = field_bytes(1, field_bytes(1, scope[0].encode()) + field_bytes(2, scope[1].encode()))
        room = max(self.max_bytes - len(head) - len(scope_field) - 64, 1024)
        requests: list[tuple[bytes, int]] = []
        batch: list[bytes] = []
        size = count = 0
        for metric in metrics:
            for chunk, n in self._metric_chunks(metric, time_ns, room):
                if batch and size + len(chunk) > room:
                    requests.append((self._request(head, scope_field, batch), count))
                    batch, size, count = [], 0, 0
                batch.append(chunk)
                size += len(chunk)
                count += n
        if batch or not requests:
            requests.append((self._request(head, scope_field, batch), count))
        return requests

    @staticmethod
    def _request(head: bytes, scope_field: bytes, metrics: list[bytes]) -> bytes:
        scope_metrics = field_bytes(2, scope_field + b"".join(metrics))
        return field_bytes(1, head + scope_metrics)


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """(value, next position) of the varint at ``pos``; raises ValueError past the end or beyond 64 bits."""
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of each field of a message; raises ValueError on malformed bytes."""
    pos = 0
    while pos < len(data):
        tag, pos = read_varint(data, pos)
        number, kind = tag >> 3, tag & 7
        if kind == 0:
            value, pos = read_varint(data, pos)
            yield number, kind, value
        elif kind == 1 or kind == 5:
            size = 8 if kind == 1 else 4
            if pos + size > len(data):
                raise ValueError("truncated fixed-size field")
            yield number, kind, data[pos : pos + size]
            pos += size
        elif kind == 2:
            length, pos = read_varint(data, pos)
            if pos + length > len(data):
                raise ValueError("truncated length-delimited field")
            yield number, kind, data[pos : pos + length]
            pos += length
        else:
            raise ValueError(f"unsupported wire type {kind}")


def partial_success(body: bytes) -> tuple[int, str]:
    """(rejected_data_points, error_message) of an ExportMetricsServiceResponse (0, "" when it has none); raises
    ValueError when the bytes are not one."""
    rejected, message = 0, ""
    for number, kind, value in fields(body):
        if number == 1 and kind == 2 and isinstance(value, bytes):
            for inner, inner_kind, inner_value in fields(value):
                if inner == 1 and inner_kind == 0 and isinstance(inner_value, int):
                    rejected = inner_value - (1 << 64) if inner_value >= 1 << 63 else inner_value
                elif inner == 2 and inner_kind == 2 and isinstance(inner_value, bytes):
                    message = inner_value.decode("utf-8", "replace")
    return rejected, message


def status_message(body: bytes) -> str:
    """The ``message`` (2) of a google.rpc.Status body, as OTLP/HTTP receivers answer errors ("" if none)."""
    try:
        for number, kind, value in fields(body):
            if number == 2 and kind == 2 and isinstance(value, bytes):
                return value.decode("utf-8", "replace")
    except ValueError:
        pass
    return ""
