"""Rendering a scrape: client_python's encoders for the small families, our own for the Neuron families.

client_python validates, sorts and escapes label names again on every line, which dominates a trn2.48xlarge
report's scrape (figures in docs/prometheus.md). ``render_families`` writes the same bytes (same label order,
escaping and float formatting; a test holds it to client_python's output) by sorting each family's label names
once. Both the Prometheus text format 0.0.4 and OpenMetrics 1.0.0 are supported.

``SampleRenderer.render`` is its fast twin for the families of report after report: a series keeps its label
set from one report to the next, so the text of each sample line up to its value (``name{labels} ``) is kept
per family and label values, and only the values are formatted (``format_values``: ``repr`` in bulk, Go's
exponent form only where it differs). It writes exactly what ``render_families`` writes (an equivalence test
holds them together).
"""

from __future__ import annotations

import math
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Generic, TypeVar

from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.utils import floatToGoString

from neuron_monitor.exporters.prometheus.families import COUNTER, GAUGE, INFO, Family

OPENMETRICS_EOF = "# EOF\n"
S = TypeVar("S")  # what a ``MetricTable``'s rows read from
# Characters of sample lines ``SampleRenderer`` keeps between reports (heads and lines): a trn2.48xlarge report
# renders about 0.4 MB (heads and lines: 0.8M characters), so real hosts are always kept; more is not held twice.
RENDER_KEEP_CHARS = 4 * 1024 * 1024
# ``SampleRenderer.whole`` keeps one template of a short report's whole text per format (a host-only report's is
# about 3 KB)
WHOLE_TEMPLATE_CHARS = 64 * 1024
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
        append(_help_lines(fam, openmetrics))
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


def _help_lines(fam: Family, openmetrics: bool) -> str:
    if openmetrics:
        header, kind = fam.name, fam.kind
    else:
        header, kind = fam.sample_name, ("gauge" if fam.kind == INFO else fam.kind)
    return f"# HELP {header} {_escape_help(fam.help, openmetrics)}\n# TYPE {header} {kind}\n"


def format_values(values: Iterable[float]) -> list[str]:
    """Each value as ``floatToGoString`` writes it (the fast twin of mapping it): ``repr`` in bulk, and Go's
    exponent form for the values it applies to (1e6 and above) or the special forms (NaN, infinities)."""
    floats = list(map(float, values))
    texts = list(map(float.__repr__, floats))
    total = sum(floats)
    if total - total == 0.0 and (not floats or max(floats) < 1e6):  # all finite and below Go's exponent range
        return texts
    fmt = _format_float
    return [t if -math.inf < v < 1e6 else fmt(v) for v, t in zip(floats, texts, strict=True)]


@dataclass(slots=True)
class _KeptFamily:
    """A family's sample lines as last rendered: its series, their line heads, the values' bits, the text."""

    keys: list[tuple[str, ...]]
    heads: list[str]
    bits: bytes
    text: str
    size: int  # characters of heads and text counted against ``SampleRenderer.keep_chars``


class SampleRenderer:
    """Renders families as ``render_families`` does, keeping each family's lines from one call to the next.

    Per family (sample name and label names) it keeps the series' label values, the text of each line up to its
    value (``name{labels} ``), the values' exact bits and the lines. A family whose series and values are the
    same as last time is served from that text; one whose values changed gets only its values formatted; new
    series get their head built once. What is kept is the newest version of each family, at most ``keep_chars``
    characters of heads and lines in all (a family that would exceed it is rendered but not kept): a real host's
    families fit many times over, while a hostile report's huge label values are never held twice (issue 32)."""

    def __init__(self, keep_chars: int = RENDER_KEEP_CHARS) -> None:
        self.keep_chars = keep_chars
        self._kept: dict[tuple[str, tuple[str, ...]], _KeptFamily] = {}
        self._kept_chars = 0
        self._help: dict[tuple[str, str, str, bool], str] = {}
        self._whole: dict[bool, tuple[list[object], list[str], str]] = {}  # ``whole``'s shape and template
        self._lock = threading.Lock()

    def render(self, families: Iterable[Family], openmetrics: bool) -> str:
        return "".join(self.parts(families, openmetrics))

    def whole(self, families: Sequence[Family], openmetrics: bool) -> str | None:
        """What ``render`` gives (its plain twin), for a short report's families written whole from one template:
        while the families and their series are those of the last call (the series' label tuples are kept from
        report to report, so this compares identical objects), only the values are formatted, in one pass. A new
        shape builds the template (``MetricTable``'s). None, for the caller to use ``parts``, when a family
        carries ``_created`` samples or the template would exceed ``WHOLE_TEMPLATE_CHARS``."""
        shape: list[object] = []
        values: list[float] = []
        for fam in families:
            if fam.created is not None:
                return None
            samples = fam.samples
            shape.append((fam.name, fam.kind, fam.help, fam.labelnames, tuple(samples)))
            values.extend(samples.values())
        with self._lock:
            kept = self._whole.get(openmetrics)
        if kept is None or kept[0] != shape:
            heads, end = _template(families, openmetrics)
            if sum(map(len, heads)) + len(end) > WHOLE_TEMPLATE_CHARS:
                return None
            kept = (shape, heads, end)
            with self._lock:
                self._whole[openmetrics] = kept
        _, heads, end = kept
        return "\n".join(map(str.__add__, heads, format_values(values))) + "\n" + end if values else end

    def parts(self, families: Iterable[Family], openmetrics: bool) -> Iterator[str]:
        """The text of ``families``, one family (its help lines and samples) at a time, as ``render`` joins it."""
        for fam in families:
            if fam.created is not None:
                yield render_families((fam,), openmetrics)
                continue
            with self._lock:  # never held across a yield
                key = (fam.name, fam.kind, fam.help, openmetrics)
                help_text = self._help.get(key)
                if help_text is None:
                    help_text = self._help[key] = _help_lines(fam, openmetrics)
                text = help_text + self._lines(fam) if fam.samples else help_text
            yield text

    def _lines(self, fam: Family) -> str:
        samples = fam.samples
        keys = list(samples)
        bits = array("d", samples.values()).tobytes()  # exact: tells -0.0 from 0.0, and NaN from a number
        where = (fam.sample_name, fam.labelnames)
        kept = self._kept.get(where)
        if kept is not None and kept.keys == keys:
            if kept.bits == bits:
                return kept.text
            heads = kept.heads
        else:
            known = dict(zip(kept.keys, kept.heads, strict=True)) if kept is not None else {}
            heads = [known.get(values) or _line_head(fam, values) for values in keys]
        text = "\n".join(map(str.__add__, heads, format_values(samples.values()))) + "\n"
        size = 2 * len(text)  # the heads take about as much as the lines
        if kept is not None:
            self._kept_chars -= kept.size
            del self._kept[where]
        if self._kept_chars + size <= self.keep_chars:
            self._kept[where] = _KeptFamily(keys, heads, bits, text, size)
            self._kept_chars += size
        return text


Reading = float | dict[tuple[str, ...], float] | None


@dataclass(frozen=True, slots=True)
class Row(Generic[S]):
    """One family of a ``MetricTable``: its name (the family name, without ``_total``/``_info``), kind, help text,
    label names, and ``read``, which gives its value from the table's source: one number (no labels), its
    samples by label values (with labels), or None (the family is left out this time)."""

    name: str
    kind: str
    help: str
    read: Callable[[S], Reading]
    labels: tuple[str, ...] = ()


class MetricTable(Generic[S]):
    """Families defined as rows (``Row``), read from a source per scrape: ``families(source)`` builds them (the
    careful twin) and ``text(source, openmetrics)`` writes what they render to from a template per shape (which
    families are there and which series each has: each family's help lines and each sample's line head joined
    once), so a scrape only formats the values. An equivalence test holds the two together, and both to what
    ``SampleRenderer`` writes for those families; adding a family is adding a row. At most ``limit`` shapes are
    kept, and the last text (the self-metrics change only when a report arrives or input is read)."""

    def __init__(self, rows: Sequence[Row[S]], limit: int = 16) -> None:
        self.rows = tuple(rows)
        self.limit = limit
        self._templates: dict[object, tuple[list[str], str]] = {}  # shape -> (line heads, trailing help lines)
        self._last: tuple[object, bytes, str] | None = None  # the last text (values often stay the same)
        self._lock = threading.Lock()

    def _read(self, source: S) -> list[Reading]:
        return [row.read(source) for row in self.rows]

    def _families(self, readings: Sequence[Reading]) -> list[Family]:
        out = []
        for row, value in zip(self.rows, readings, strict=True):
            if value is None:
                continue
            if isinstance(value, dict):
                samples = {values: float(v) for values, v in value.items()}
            else:
                samples = {(): float(value)}
            out.append(Family(row.name, row.kind, row.help, row.labels, samples))
        return out

    def families(self, source: S) -> list[Family]:
        """The rows' families as ``source`` has them now."""
        return self._families(self._read(source))

    def text(self, source: S, openmetrics: bool) -> str:
        """What ``families(source)`` renders to, from the template of their shape (built on its first use)."""
        readings = self._read(source)
        shape: list[object] = [openmetrics]
        values: list[float] = []
        for value in readings:
            if value is None:
                shape.append(None)
            elif isinstance(value, dict):
                shape.append(tuple(value))
                values.extend(value.values())
            else:
                shape.append(True)
                values.append(value)
        key = tuple(shape)
        bits = array("d", values).tobytes()  # exact: tells -0.0 from 0.0 (equal as numbers, written apart)
        with self._lock:
            last = self._last
            if last is not None and last[0] == key and last[1] == bits:
                return last[2]
            template = self._templates.get(key)
        if template is None:
            template = _template(self._families(readings), openmetrics)
            with self._lock:
                if len(self._templates) >= self.limit:
                    self._templates.clear()
                self._templates[key] = template
        heads, end = template
        text = "\n".join(map(str.__add__, heads, format_values(values))) + "\n" + end if values else end
        with self._lock:
            self._last = (key, bits, text)
        return text


def _template(families: Sequence[Family], openmetrics: bool) -> tuple[list[str], str]:
    """The text of ``families`` but their values: each sample's line up to its value, the help lines of a family
    joined to its first sample's, and the help lines that no sample follows (a family without samples)."""
    heads: list[str] = []
    pending = ""
    for fam in families:
        pending += _help_lines(fam, openmetrics)
        for values in fam.samples:
            heads.append(pending + _line_head(fam, values))
            pending = ""
    return heads, pending


def _line_head(fam: Family, values: tuple[str, ...]) -> str:
    """A sample line up to its value: ``name{labels} `` with the label names sorted, as client_python writes."""
    names = fam.labelnames
    if not names:
        return fam.sample_name + " "
    order = sorted(range(len(names)), key=names.__getitem__)
    labels = '",'.join([f'{names[i]}="{_escape_value(values[i])}' for i in order])
    return f'{fam.sample_name}{{{labels}"}} '


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
        return _openmetrics_encoder(_registry(metrics)).decode("utf-8").removesuffix(OPENMETRICS_EOF)
    return _text_encoder(_registry(metrics)).decode("utf-8")


def _registry(metrics: Sequence[Metric]) -> SimpleNamespace:
    """The ``collect()`` interface client_python's encoders expect, over a list of metrics."""
    return SimpleNamespace(collect=lambda: metrics)
