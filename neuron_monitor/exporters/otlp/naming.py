"""Metric and attribute names: ``prometheus`` (default) and ``otel``.

``prometheus``: the names an OTLP endpoint of Prometheus or Mimir turns into exactly the series
``neuron-monitor-prometheus`` serves. Their translation (the OpenTelemetry specification's "Prometheus and
OpenMetrics Compatibility", implemented by prometheus/otlptranslator; Prometheus's default
``UnderscoreEscapingWithSuffixes``) splits a name at every character outside ``[a-zA-Z0-9:]``, appends the unit's
Prometheus word unless the name already has it, moves ``total`` to the end of a monotonic sum's name and ``ratio``
to the end of a unit-``1`` gauge's. So a metric keeps the family's name (``_info`` appended for info families) and
gets a unit only where the name already ends in that unit's word (``_bytes`` -> ``By``, ``_seconds`` -> ``s``,
``_ratio`` -> ``1`` on gauges ...): the translation then gives back the family's name, ``_total`` added to
counters. Attributes are the family's labels, unchanged.

``otel``: OpenTelemetry conventions where they exist. A family whose spec declares one (``PromFamily.otel``: the ECC
events are ``hw.errors`` with ``error.type``, the device health verdicts ``hw.status``, an UpDownCounter with
``hw.state`` ``ok``/``failed``) takes its name, unit and attribute names from it. Other names are
``neuron.<family>`` without the ``neuron_`` prefix and unit word (``neuroncore_utilization_ratio`` ->
``neuron.neuroncore_utilization``, unit ``1``); the instance labels are left out (they are resource attributes:
``host.id``, ``host.type``, ``cloud.region``, ``cloud.availability_zone``); a Neuron device is ``hw.id`` with
``hw.type`` = ``npu`` (the hardware conventions, open-telemetry/semantic-conventions ``docs/hardware/common.md``,
have no NPU type and allow a custom value), a latency percentile is ``quantile`` (``p50`` -> ``0.5``), pod labels
are ``k8s.pod.name``, ``k8s.namespace.name`` and ``k8s.container.name``, a runtime's pid is ``process.pid``; every
other label becomes ``neuron.<label>``.
"""

from __future__ import annotations

from collections.abc import Callable

from neuron_monitor.exporters.otlp.model import MetricName
from neuron_monitor.exporters.prometheus.families import COUNTER, GAUGE, INFO, Family
from neuron_monitor.exporters.prometheus.labels import INSTANCE_LABEL_KEYS
from neuron_monitor.schema.spec import OtelName, registry

PROMETHEUS = "prometheus"
OTEL = "otel"
NAMINGS = (PROMETHEUS, OTEL)

# the last word of a Prometheus name -> the UCUM unit whose Prometheus word it is (otlptranslator's unit map)
UNIT_WORDS: dict[str, str] = {
    "bytes": "By",
    "seconds": "s",
    "celsius": "Cel",
    "watts": "W",
    "joules": "J",
    "volts": "V",
    "amperes": "A",
    "hertz": "Hz",
    "percent": "%",
}
RATIO = "ratio"  # unit "1", gauges only (the translation appends _ratio to unit-1 gauges only)


def unit_of(name: str, kind: str) -> str:
    """The unit whose Prometheus word ``name`` ends with ("" when none, or for info families)."""
    if kind == INFO:
        return ""
    word = name.rsplit("_", 1)[-1]
    if word == RATIO:
        return "1" if kind == GAUGE else ""
    return UNIT_WORDS.get(word, "")


def prometheus_name(family: Family) -> MetricName:
    """The family under its Prometheus exporter name (see the module docstring)."""
    name = family.name + "_info" if family.kind == INFO else family.name
    return MetricName(name, unit_of(family.name, family.kind), family.help, family.labelnames)


# ---- --naming otel ----------------------------------------------------------------------------------------------

INSTANCE_LABELS = frozenset(label for label, _ in INSTANCE_LABEL_KEYS) | {"ultraserver_id"}
DEVICE_LABEL = "neuron_device_index"
PERCENTILE_LABEL = "percentile"
OTEL_LABELS: dict[str, str] = {
    DEVICE_LABEL: "hw.id",
    PERCENTILE_LABEL: "quantile",
    "pod_name": "k8s.pod.name",
    "namespace": "k8s.namespace.name",
    "container_name": "k8s.container.name",
    "pid": "process.pid",
}
HW_TYPE = ("hw.type", "npu")


def quantile(percentile: str) -> str:
    """``p50`` -> ``0.5``, ``p99.9`` -> ``0.999``, anything else as it is."""
    if percentile[:1] in ("p", "P"):
        try:
            return format(float(percentile[1:]) / 100.0, ".12g")
        except ValueError:
            pass
    return percentile


_CONVENTIONS: dict[str, OtelName] | None = None


def conventions() -> dict[str, OtelName]:
    """Family name -> the semantic convention its spec declares (``PromFamily.otel``), read once."""
    global _CONVENTIONS
    if _CONVENTIONS is None:
        _CONVENTIONS = {f.name: f.otel for spec in registry().all() for f in spec.prometheus if f.otel is not None}
    return _CONVENTIONS


def otel_name(family: Family) -> MetricName:
    """The family under OpenTelemetry conventions (see the module docstring)."""
    convention = conventions().get(family.name) if family.kind != INFO else None
    unit = unit_of(family.name, family.kind)
    base = family.name
    if unit or base.endswith("_" + RATIO):
        base = base.rsplit("_", 1)[0]
    base = base.removeprefix("neuron_")
    name = "neuron." + (base + "_info" if family.kind == INFO else base)
    renamed: dict[str, str] = {}
    value_maps: dict[int, dict[str, str]] = {}
    if convention is not None:
        name, unit = convention.name, convention.unit
        renamed = dict(convention.labels)
        value_maps = {
            family.labelnames.index(label): dict(pairs)
            for label, pairs in convention.values
            if label in family.labelnames
        }
    keys: list[str | None] = []
    for label in family.labelnames:
        if label in INSTANCE_LABELS and family.kind != INFO:
            keys.append(None)
        else:
            keys.append(renamed.get(label) or OTEL_LABELS.get(label, "neuron." + label))
    device = DEVICE_LABEL in family.labelnames
    if PERCENTILE_LABEL in family.labelnames:
        value_maps.setdefault(family.labelnames.index(PERCENTILE_LABEL), {})
    percentile_at = family.labelnames.index(PERCENTILE_LABEL) if PERCENTILE_LABEL in family.labelnames else -1
    rewrite: Callable[[tuple[str, ...]], tuple[str, ...]] | None = None
    if device or value_maps:
        if device:
            keys.append(HW_TYPE[0])

        def rewrite(values: tuple[str, ...]) -> tuple[str, ...]:
            if value_maps:
                out = list(values)
                for at, mapping in value_maps.items():
                    out[at] = quantile(out[at]) if at == percentile_at else mapping.get(out[at], out[at])
                values = tuple(out)
            return (*values, HW_TYPE[1]) if device else values

    updown = convention.updown if convention is not None else False
    return MetricName(name, unit, family.help, tuple(keys), rewrite, updown)


NAMERS: dict[str, Callable[[Family], MetricName]] = {PROMETHEUS: prometheus_name, OTEL: otel_name}
KINDS = (GAUGE, COUNTER, INFO)
