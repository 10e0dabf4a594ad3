"""The parts of the docs that are written from the group specs (``make docs``, scripts/make_docs.py).

A generated part of a Markdown file sits between ``<!-- generated: WHAT -->`` and ``<!-- end generated -->``;
`rewrite` replaces what is between them with what the registry says now and leaves every other line alone, so the
hand-written notes around a generated part stay. ``tests/schema/test_docs_generated.py`` fails when a committed
file differs from its rewrite: whoever changes a spec runs ``make docs`` and commits the result (telegraf writes
its plugins' READMEs from their sample configs the same way).

What can be generated (``WHAT``):

* ``group-names NAME``: a group README's Prometheus families, CloudWatch metrics, timeline tracks, det rules and
  neuron-monitor-top columns.
* ``group-list``: the README's list of the metric groups, each with what it reports and a link to its folder.
* ``prometheus-families``: every family of every group with its type, labels and help (docs/prometheus.md).
* ``cloudwatch-metrics``: every CloudWatch metric of every group with its unit and dimensions (docs/cloudwatch.md).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from typing import Any

from neuron_monitor.schema.spec import (
    CORE_SCOPE,
    COUNTER,
    INSTANCE_SCOPE,
    RUNTIME_SCOPE,
    SYSTEM,
    CwMetric,
    GroupSpec,
    PromFamily,
    registry,
)

WIDTH = 120  # the docs' line length
REGION = re.compile(r"(<!-- generated: (?P<what>[^>]*?) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)

_PROM_SCOPES = {INSTANCE_SCOPE: "instance", RUNTIME_SCOPE: "runtime", CORE_SCOPE: "core"}


class DocError(ValueError):
    """A marked region names something that cannot be generated."""


def family_name(family: PromFamily) -> str:
    """The family's name as it is scraped (counters end in ``_total``)."""
    return family.name + ("_total" if family.kind == COUNTER else "")


def _prom_labels(family: PromFamily) -> str:
    text = f"{_PROM_SCOPES.get(family.scope, family.scope)} labels"
    if family.labels:
        text += ", plus " + ", ".join(f"`{label}`" for label in family.labels)
    return text


def cw_name(metric: CwMetric) -> str:
    """The metric's name, ``<key>`` standing for the keyed suffix."""
    return metric.name + ("<key>" if metric.keyed else "")


def _cw_dims(metric: CwMetric) -> str:
    text = f"{metric.scope} dimensions"
    if metric.key_dims:
        text += " plus " + ", ".join(f"`{d}`" for d in metric.key_dims)
    return text


def _names(items: list[str]) -> str:
    return ", ".join(f"`{i}`" for i in items) if items else "none"


def group_names(spec: GroupSpec[Any]) -> str:
    """A group README's lists of what its spec serves (the part ``group-names NAME`` holds)."""
    lines = ["**Prometheus** ([docs/prometheus.md](../../../docs/prometheus.md)):", ""]
    lines += [f"- `{family_name(f)}` ({f.kind}, {_prom_labels(f)})" for f in spec.prometheus] or ["- none"]
    lines += ["", "**CloudWatch** ([docs/cloudwatch.md](../../../docs/cloudwatch.md)):", ""]
    lines += [f"- `{cw_name(m)}` ({m.unit}, {_cw_dims(m)})" for m in spec.cloudwatch] or ["- none"]
    consumers = (
        f"**Timeline tracks**: {_names([t.name for t in spec.tracks])}. "
        f"**det rules**: {_names([r.kind for r in spec.det_rules])}. "
        f"**neuron-monitor-top columns**: {_names([c.header for c in spec.top_columns])}."
    )
    lines += ["", *textwrap.wrap(consumers, WIDTH, break_on_hyphens=False)]
    return "\n".join(lines) + "\n"


def _first_sentence(doc: str) -> str:
    """The spec's one-line summary: its doc's first paragraph without the leading ``name`` (placement):."""
    paragraph = " ".join(doc.split("\n\n")[0].split())
    return re.sub(r"^``[a-z_]+`` \((system|runtime)\): ", "", paragraph).replace("``", "`")


def group_list() -> str:
    """The README's list of the metric groups, system groups first (the part ``group-list`` holds)."""
    lines: list[str] = []
    for spec in registry().all():
        where = "`system_data`" if spec.placement == SYSTEM else "each runtime's `report`"
        item = f"- [`{spec.name}`](neuron_monitor/groups/{spec.name}/README.md) ({where}): {_first_sentence(spec.doc)}"
        lines += textwrap.wrap(item, WIDTH, subsequent_indent="  ", break_on_hyphens=False, break_long_words=False)
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def prometheus_families() -> str:
    """Every family of every group (the part ``prometheus-families`` holds)."""
    lines = ["| Metric | Type | Labels | Group | Help |", "|---|---|---|---|---|"]
    for spec in registry().all():
        for f in spec.prometheus:
            lines.append(f"| `{family_name(f)}` | {f.kind} | {_prom_labels(f)} | `{spec.name}` | {_cell(f.help)} |")
        for s in spec.sums:
            if s.total is not None:
                f = s.total
                help_ = f"{_cell(f.help)} (summed by the exporter over the runtimes)"
                lines.append(f"| `{family_name(f)}` | {f.kind} | {_prom_labels(f)} | `{spec.name}` | {help_} |")
    return "\n".join(lines) + "\n"


def cloudwatch_metrics() -> str:
    """Every CloudWatch metric of every group (the part ``cloudwatch-metrics`` holds)."""
    lines = ["| Metric | Unit | Dimensions | Group |", "|---|---|---|---|"]
    for spec in registry().all():
        lines += [f"| `{cw_name(m)}` | {m.unit} | {_cw_dims(m)} | `{spec.name}` |" for m in spec.cloudwatch]
    return "\n".join(lines) + "\n"


def generate(what: str) -> str:
    """The text of the part ``what`` (see the module docstring)."""
    parts: dict[str, Callable[[], str]] = {
        "group-list": group_list,
        "prometheus-families": prometheus_families,
        "cloudwatch-metrics": cloudwatch_metrics,
    }
    kind, _, arg = what.partition(" ")
    if kind == "group-names":
        specs = {s.name: s for s in registry().all()}
        if arg not in specs:
            raise DocError(f"group-names: no group {arg!r}")
        return group_names(specs[arg])
    if what not in parts:
        raise DocError(f"unknown generated part {what!r} (known: group-names NAME, {', '.join(parts)})")
    return parts[what]()


def rewrite(text: str) -> str:
    """``text`` with every marked part generated anew; the rest unchanged."""
    return REGION.sub(lambda m: m.group(1) + generate(m.group("what")) + m.group(4), text)
