"""Metric families as the exporter builds them from one report, before client_python sees them.

A ``Family`` holds its samples as ``{label values tuple: value}``: a repeated label set overwrites the earlier
value (last wins, as AWS's script does when two runtimes share a tag), so a scrape never carries duplicate
series. ``to_metric`` turns a family into a fresh ``prometheus_client`` ``Metric`` at scrape time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

GAUGE = "gauge"
COUNTER = "counter"
INFO = "info"

_SUFFIX = {GAUGE: "", COUNTER: "_total", INFO: "_info"}


@dataclass
class Family:
    """One metric family: ``name`` is the family name (without ``_total``/``_info``)."""

    name: str
    kind: str
    help: str
    labelnames: tuple[str, ...]
    samples: dict[tuple[str, ...], float] = field(default_factory=dict)
    created: dict[tuple[str, ...], float] | None = None  # counters with --created-series: label values -> epoch s

    @property
    def sample_name(self) -> str:
        return self.name + _SUFFIX[self.kind]

    def to_metric(self) -> Metric:
        metric = Metric(self.name, self.help, self.kind)
        sname = self.sample_name
        names = self.labelnames
        metric.samples = [
            Sample(sname, dict(zip(names, values, strict=True)), value) for values, value in self.samples.items()
        ]
        if self.created is not None:  # client_python's order: each child's _total, then its _created
            created, cname = self.created, self.name + "_created"
            metric.samples = [
                s
                for sample, values in zip(metric.samples, self.samples, strict=True)
                for s in (sample, Sample(cname, sample.labels, created[values]))
            ]
        return metric


class FamilySet:
    """Families in first-use order, created on demand with the label names fixed at creation."""

    def __init__(self) -> None:
        self.by_name: dict[str, Family] = {}

    def family(self, name: str, kind: str, help_text: str, labelnames: tuple[str, ...]) -> Family:
        fam = self.by_name.get(name)
        if fam is None:
            fam = Family(name, kind, help_text, labelnames)
            self.by_name[name] = fam
        return fam

    def families(self) -> list[Family]:
        return [f for f in self.by_name.values() if f.samples]

    def series_count(self) -> int:
        return sum(len(f.samples) for f in self.by_name.values())
