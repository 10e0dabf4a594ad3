"""Rendering a scrape: client_python's encoders for the small families, our own for the Neuron families.

client_python validates, sorts and escapes label names again on every line, which dominates a trn2.48xlarge
report's scrape (figures in docs/prometheus.md). ``render_families`` writes the same bytes (same label order,
escaping and float formatting; a test holds it to client_python's output) by sorting each family's label names
once. Both the Prometheus text format 0.0.4 and OpenMetrics 1.0.0 are supported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.utils import floatToGoString

from neuron_monitor.exporters.prometheus.families import COUNTER, GAUGE, INFO, Family

OPENMETRICS_EOF = "# EOF\n"
_format_float: Callable[[float], str] = floatToGoString


def _escape_value(value: str) -> str:
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def _escape_help(text: str, openmetrics: bool) -> str:
    text = text.replace("\\", r"\\").replace("\n", r"\n")
    return text.replace('"', r"\"") if openmetrics else text


def render_families(families: Iterable[Family], openmetrics: bool) -> str:
    out: list[str] = []
    append = out.append
    fmt = _format_float
    for fam in families:
        sample_name = fam.sample_name
        if openmetrics:
            header, kind = fam.name, fam.kind
        else:
            header, kind = sample_name, ("gauge" if fam.kind == INFO else fam.kind)
        append(f"# HELP {header} {_escape_help(fam.help, openmetrics)}\n# TYPE {header} {kind}\n")
        names = fam.labelnames
        created = fam.created
        if not names:
            if created is not None:
                _created_lines(out, fam, dict.fromkeys(fam.samples, ""), openmetrics)
                continue
            for value in fam.samples.values():
                append(f"{sample_name} {fmt(value)}\n")
            continue
        order = sorted(range(len(names)), key=names.__getitem__)
        prefixes = [f'{names[i]}="' for i in order]
        pairs = list(zip(prefixes, order, strict=True))
        esc = _escape_value
        if created is None:
            for values, value in fam.samples.items():
                labels = '",'.join([p + esc(values[i]) for p, i in pairs])
                append(f'{sample_name}{{{labels}"}} {fmt(value)}\n')
            continue
        label_text = {}
        for values in fam.samples:
            label_text[values] = "{" + '",'.join([p + esc(values[i]) for p, i in pairs]) + '"}'
        _created_lines(out, fam, label_text, openmetrics)
    return "".join(out)


def _created_lines(out: list[str], fam: Family, label_text: dict[tuple[str, ...], str], openmetrics: bool) -> None:
    """A counter's samples with ``_created``, in client_python's order: interleaved in OpenMetrics, a separate
    gauge block after the family in the Prometheus text format."""
    assert fam.created is not None
    fmt, created = _format_float, fam.created
    total, cname = fam.sample_name, fam.name + "_created"
    if openmetrics:
        for values, value in fam.samples.items():
            labels = label_text[values]
            out.append(f"{total}{labels} {fmt(value)}\n{cname}{labels} {fmt(created[values])}\n")
        return
    for values, value in fam.samples.items():
        out.append(f"{total}{label_text[values]} {fmt(value)}\n")
    out.append(f"# HELP {cname} {_escape_help(fam.help, False)}\n# TYPE {cname} gauge\n")
    for values in fam.samples:
        out.append(f"{cname}{label_text[values]} {fmt(created[values])}\n")


class _Metrics:
    """The ``collect()`` interface client_python's encoders expect, over a list of metrics."""

    def __init__(self, metrics: Sequence[Metric]) -> None:
        self._metrics = metrics

    def collect(self) -> Sequence[Metric]:
        return self._metrics


_text_encoder: Callable[[Any], bytes] = generate_latest
_openmetrics_encoder: Callable[[Any], bytes] = generate_openmetrics


_SAMPLE_SUFFIX = {GAUGE: "", COUNTER: "_total", INFO: "_info"}


def as_family(metric: Metric) -> Family | None:
    """A client_python ``Metric`` as a ``Family`` when ``render_families`` writes it exactly as client_python would
    (a gauge, counter or info whose samples all carry the family's sample name and one label set, no timestamp,
    exemplar or unit); else None."""
    kind = metric.type
    suffix = _SAMPLE_SUFFIX.get(kind)
    if suffix is None or metric.unit:
        return None
    sample_name = metric.name + suffix
    samples: dict[tuple[str, ...], float] = {}
    names: tuple[str, ...] | None = None
    for sample in metric.samples:
        if sample.name != sample_name or sample.timestamp is not None or sample.exemplar is not None:
            return None
        labels = sample.labels
        if names is None:
            names = tuple(labels)
        elif tuple(labels) != names:
            return None
        values = tuple(labels.values())
        if values in samples:
            return None
        samples[values] = sample.value
    return Family(metric.name, kind, metric.documentation, names or (), samples)


def render_metrics(metrics: Sequence[Metric], openmetrics: bool) -> str:
    """client_python ``Metric`` objects (process, GC, platform collectors) as exposition text, without ``# EOF``:
    through ``render_families`` when each converts (``as_family``), else through client_python's encoders."""
    if not metrics:
        return ""
    families = [as_family(m) for m in metrics]
    if all(f is not None for f in families):
        return render_families([f for f in families if f is not None], openmetrics)
    if openmetrics:
        return _openmetrics_encoder(_Metrics(metrics)).decode("utf-8").removesuffix(OPENMETRICS_EOF)
    return _text_encoder(_Metrics(metrics)).decode("utf-8")
