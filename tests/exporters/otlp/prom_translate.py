"""Prometheus's translation of OTLP metrics into series, as its OTLP receiver applies it by default
(``UnderscoreEscapingWithSuffixes``), written from the OpenTelemetry specification "Prometheus and OpenMetrics
Compatibility" (``specification/compatibility/prometheus_and_openmetrics.md``, "OTLP Metric points to
Prometheus") and Prometheus's guide "Using Prometheus as your OpenTelemetry backend":

- a metric name is split into words at every character outside ``[a-zA-Z0-9:]`` (so repeated underscores
  collapse); the unit's Prometheus word (``By`` bytes, ``s`` seconds, ``1`` none, ...) is appended unless a word
  of the name already is it; a monotonic cumulative sum loses every ``total`` word and gets one at the end; a
  gauge of unit ``1`` loses every ``ratio`` word and gets one at the end; the words are joined with ``_``;
- an attribute name has each character outside ``[a-zA-Z0-9_]`` replaced by ``_`` (a leading digit gets ``key_``);
- ``job`` is ``service.namespace/service.name`` (or ``service.name``), ``instance`` is ``service.instance.id``;
  the other resource attributes go to one ``target_info`` series.
"""

from __future__ import annotations

import re
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

UNIT_WORDS = {
    "d": "days", "h": "hours", "min": "minutes", "s": "seconds", "ms": "milliseconds", "us": "microseconds",
    "ns": "nanoseconds", "By": "bytes", "KiBy": "kibibytes", "MiBy": "mebibytes", "GiBy": "gibibytes",
    "TiBy": "tibibytes", "KBy": "kilobytes", "MBy": "megabytes", "GBy": "gigabytes", "TBy": "terabytes",
    "m": "meters", "V": "volts", "A": "amperes", "J": "joules", "W": "watts", "g": "grams", "Cel": "celsius",
    "Hz": "hertz", "1": "", "%": "percent",
}  # fmt: skip
Series = tuple[str, tuple[tuple[str, str], ...]]


def metric_name(name: str, unit: str, monotonic_sum: bool, gauge: bool) -> str:
    words = [w for w in re.split(r"[^a-zA-Z0-9:]", name) if w]
    unit_word = UNIT_WORDS.get(unit, re.sub(r"[^a-zA-Z0-9:]", "_", unit) if unit and "{" not in unit else "")
    if unit_word and unit_word not in words:
        words.append(unit_word)
    if monotonic_sum:
        words = [w for w in words if w != "total"] + ["total"]
    if unit == "1" and gauge:
        words = [w for w in words if w != "ratio"] + ["ratio"]
    out = "_".join(words)
    return "_" + out if out[:1].isdigit() else out


def label_name(key: str) -> str:
    out = re.sub(r"[^a-zA-Z0-9_]", "_", key)
    if out[:1].isdigit():
        out = "key_" + out
    return out


def translate(request: ExportMetricsServiceRequest) -> dict[Series, float]:
    """The series (name, sorted labels) a Prometheus OTLP endpoint stores for ``request``, with their values."""
    out: dict[Series, float] = {}
    for rm in request.resource_metrics:
        resource = {kv.key: kv.value.string_value for kv in rm.resource.attributes}
        job = resource.get("service.name", "")
        if resource.get("service.namespace"):
            job = f"{resource['service.namespace']}/{job}"
        base: dict[str, str] = {}
        if job:
            base["job"] = job
        if resource.get("service.instance.id"):
            base["instance"] = resource["service.instance.id"]
        info = {
            label_name(k): v
            for k, v in resource.items()
            if k not in ("service.name", "service.namespace", "service.instance.id") and v
        }
        out[("target_info", tuple(sorted({**base, **info}.items())))] = 1.0
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                data: Any = getattr(m, kind)
                monotonic = kind == "sum" and data.is_monotonic and data.aggregation_temporality == 2
                name = metric_name(m.name, m.unit, monotonic, kind == "gauge")
                for p in data.data_points:
                    labels = dict(base)
                    for kv in p.attributes:
                        if kv.value.string_value:
                            labels[label_name(kv.key)] = kv.value.string_value
                    out[(name, tuple(sorted(labels.items())))] = p.as_double
    return out
