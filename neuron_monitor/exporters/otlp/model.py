"""The OTLP data model of one report: the Prometheus exporter's families as OTLP metrics.

A report is first counted and shaped by the Prometheus exporter's own ``SnapshotBuilder`` (the counter ledger,
label sets, series budget and limits of ``neuron-monitor-prometheus``), so a pushed point carries exactly the value
a scrape would show. Then each family becomes one metric (``naming`` gives its name, unit and attribute keys):

- a counter: a cumulative, monotonic Sum. Its start time is when the exporter began counting the series (the
  start of the period of the report that first carried it), kept across gaps between reports and across a
  daemon restart (the ledger keeps counting); a value lower than the previous one is a reset (a runtime that
  came back under the same tag starts again from zero): the series gets a new start time, never a negative step;
- a gauge: a Gauge (no start time);
- an info family: a Gauge of value 1 named ``<name>_info`` (Prometheus naming), its labels as attributes.

Latency percentiles stay gauges with their ``percentile`` label (``quantile`` under ``--naming otel``), not a
Summary: the runtime reports the percentiles of a period without the count and sum of the same executions that a
Summary point requires, and Prometheus would turn a Summary into ``_sum``/``_count`` series the scrape path does
not have.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from neuron_monitor.exporters.prometheus.families import COUNTER, INFO, Family

Pairs = tuple[tuple[str, str], ...]  # (key, value) attributes of a resource
# a data point's attributes: the metric's keys (None: the label is left out) and the sample's label values;
# a key whose value is empty is no attribute (Prometheus treats an empty label as no label)
Labels = tuple[tuple[str | None, ...], tuple[str, ...]]
Point = tuple[Labels, float, int]  # attributes, value, start time (ns; 0 for gauges)
EVICT_EVERY = 16  # reports between sweeps of the start-time table
KEEP_ABSENT = 16  # reports a counter series may be missing before its start time is forgotten


@dataclass(frozen=True, slots=True)
class MetricName:
    """What ``naming`` makes of one family."""

    name: str
    unit: str
    description: str
    keys: tuple[str | None, ...]  # one per label of the family
    values: Callable[[tuple[str, ...]], tuple[str, ...]] | None = None  # rewrites label values (None: as they are)
    updown: bool = False  # a gauge sent as an UpDownCounter (a non-monotonic cumulative sum)


@dataclass(slots=True)
class MetricOut:
    name: str
    description: str
    unit: str
    monotonic: bool  # a cumulative monotonic Sum (else a Gauge, or the non-monotonic Sum of ``updown``)
    points: list[Point]
    updown: bool = False  # a cumulative non-monotonic Sum (an UpDownCounter's)


class StartTimes:
    """The start time of every counter series: ``(metric, label values) -> [start ns, last value, last time ns,
    report number]``. Series missing from ``KEEP_ABSENT`` reports are forgotten (bounded by the series a report
    may have, which the Prometheus exporter's limit caps)."""

    def __init__(self) -> None:
        self._table: dict[tuple[str, tuple[str, ...]], list[float]] = {}
        self.report = 0
        self.resets = 0

    def __len__(self) -> int:
        return len(self._table)

    def next_report(self) -> None:
        self.report += 1
        if self.report % EVICT_EVERY == 0:
            oldest = self.report - KEEP_ABSENT
            self._table = {k: v for k, v in self._table.items() if v[3] >= oldest}

    def start(self, name: str, values: tuple[str, ...], value: float, time_ns: int, period_ns: int) -> int:
        """The start time of this point of the series (ns)."""
        key = (name, values)
        entry = self._table.get(key)
        if entry is None:
            start = time_ns - period_ns
            self._table[key] = [start, value, time_ns, self.report]
            return start
        start = int(entry[0])
        if value < entry[1] or start >= time_ns:  # a reset (or time went backwards): count from this period on
            if value < entry[1]:
                self.resets += 1
            start = max(int(entry[2]) + 1, time_ns - period_ns) if entry[2] < time_ns else time_ns - period_ns
            entry[0] = start
        entry[1], entry[2], entry[3] = value, time_ns, self.report
        return start


class ReportConverter:
    """Families -> ``MetricOut`` with ``namer``'s names; keeps the counters' start times across reports."""

    def __init__(self, namer: Callable[[Family], MetricName]) -> None:
        self.namer = namer
        self.starts = StartTimes()
        self._names: dict[tuple[str, str, tuple[str, ...]], MetricName] = {}

    def name(self, family: Family) -> MetricName:
        key = (family.name, family.kind, family.labelnames)
        named = self._names.get(key)
        if named is None:
            if len(self._names) > 10_000:
                self._names.clear()
            named = self.namer(family)
            self._names[key] = named
        return named

    def convert(self, families: Sequence[Family], time_ns: int, period_s: float) -> list[MetricOut]:
        """The report's metrics; ``time_ns``: its time, ``period_s``: its shortest group period (the span the
        first count of a new series covers)."""
        self.starts.next_report()
        period_ns = max(int(period_s * 1e9), 1)
        out: list[MetricOut] = []
        start_of = self.starts.start
        for family in families:
            named = self.name(family)
            keys, rewrite = named.keys, named.values
            points: list[Point]
            if family.kind == COUNTER:
                mname = named.name
                points = [
                    (
                        (keys, rewrite(values) if rewrite else values),
                        value,
                        start_of(mname, values, value, time_ns, period_ns),
                    )
                    for values, value in family.samples.items()
                ]
            elif named.updown:  # its start: when the series was first sent (a level may go down: no reset)
                mname = named.name
                points = [
                    (
                        (keys, rewrite(values) if rewrite else values),
                        value,
                        start_of(mname, values, 0.0, time_ns, period_ns),
                    )
                    for values, value in family.samples.items()
                ]
            else:
                points = [
                    ((keys, rewrite(values) if rewrite else values), 1.0 if family.kind == INFO else value, 0)
                    for values, value in family.samples.items()
                ]
            counter = family.kind == COUNTER
            out.append(
                MetricOut(named.name, named.description, named.unit, counter, points, named.updown and not counter)
            )
        return out


def labels_items(labels: Labels) -> Pairs:
    """The attributes of a point as (key, value) pairs: keys left out and empty values skipped."""
    keys, values = labels
    return tuple((k, v) for k, v in zip(keys, values, strict=True) if k is not None and v != "")
