"""One accepted report -> one immutable ``Snapshot``: the report, its counters, and (once served) its families.

``SnapshotBuilder.ingest`` runs the counting pass (``counting``) and commits the counter ledger only when the
counted values are well typed, so a rejected report changes nothing. The gauge families are shaped from the
report the first time the snapshot is served (``Snapshot.families``) and kept: a report superseded before any
scrape costs no shaping at all, and every scrape of one report sees the same families. Shaping raises
``MalformedReport`` on a wrong type; the exporter then keeps serving the previous good snapshot.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from neuron_monitor.exporters.prometheus.budget import BUDGET, SeriesBudget
from neuron_monitor.exporters.prometheus.context import LabelTable, ShapeContext
from neuron_monitor.exporters.prometheus.cores import shape_core_info, shape_core_totals
from neuron_monitor.exporters.prometheus.counting import count_report
from neuron_monitor.exporters.prometheus.daemon_metrics import shape_daemon, shape_sources
from neuron_monitor.exporters.prometheus.families import Family, FamilySet
from neuron_monitor.exporters.prometheus.labelcap import DEFAULT_MAX_LABEL_LENGTH, LabelGuard, cap_strings
from neuron_monitor.exporters.prometheus.labels import PodMap, instance_labels
from neuron_monitor.exporters.prometheus.landing import HostSummary, summarize
from neuron_monitor.exporters.prometheus.ledger import CounterLedger, Totals
from neuron_monitor.exporters.prometheus.runtime_metrics import RuntimeShaper
from neuron_monitor.exporters.prometheus.series_limit import DEFAULT_MAX_SERIES, SeriesLimit
from neuron_monitor.exporters.prometheus.system_metrics import shape_info, shape_system
from neuron_monitor.exporters.prometheus.values import MalformedReport, number
from neuron_monitor.schema.read import Report, read_report


@dataclass
class ShapeOptions:
    instance_labels_everywhere: bool = True  # AWS-compatible default; False keeps them on instance_info only
    always_k8s_labels: bool = False  # --enable-k8s-info: pod labels even before a report carries k8s info
    max_label_length: int = DEFAULT_MAX_LABEL_LENGTH  # --max-label-length; 0: no cap
    core_device_label: bool = True  # --core-labels device (default); False: --core-labels aws
    dra_claim_labels: str = "auto"  # --dra-claim-labels: auto (when the report has DRA claims), on, off
    series_detail: str = BUDGET  # --series-detail: "budget" (default) thins detail (see ``budget``), "full" serves all
    max_series: int = DEFAULT_MAX_SERIES  # --max-series-per-report; 0: no limit (see ``series_limit``)


@dataclass
class Shaped:
    families: tuple[Family, ...]
    series: int


@dataclass
class Snapshot:
    report: dict[str, Any]  # emptied once shaped: the families hold what is served
    totals: Totals
    options: ShapeOptions
    runtimes: int
    min_period: float  # the shortest group period in the report (its cadence), 0 if none
    report_time: float | None
    max_period: float = 0.0  # the longest group period in the report, 0 if none
    bad_input: Counter[str] = field(default_factory=Counter)  # impossible counted values dropped, by reason
    groups_seen: frozenset[str] = frozenset()
    groups_failed: frozenset[str] = frozenset()
    group_errors: Counter[str] = field(default_factory=Counter)
    truncated_labels: int = 0  # strings shortened to the label cap when shaped
    series_cut: bool = False  # the counting pass reached the series limit (shaping sets it too)
    read: Report | None = None  # the report as the counting pass read it (reused when shaping)
    guard: LabelGuard | None = None  # the builder's check for label values over the cap (None: no cap)
    budget: SeriesBudget | None = None  # the builder's series budget (None: --series-detail full)
    summary: HostSummary | None = None  # the landing page's verdicts and host, taken when shaped
    table: LabelTable | None = None  # the builder's label tuples, kept across reports (see ``context``)
    line: bytes | None = None  # the report's line when ``report`` is a thin version of it: decoded whole to shape
    _shaped: Shaped | None = None
    _devices: int | None = None  # neuron_device_count of the report's hardware info, kept once it is shaped
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def shaped(self) -> Shaped:
        """The families of this report, shaped on first use (raises ``MalformedReport``). When a label value
        is longer than the cap, the report's long strings are shortened and it is shaped again (see
        ``labelcap``; the ledger caps its keys the same way)."""
        with self._lock:
            if self._shaped is None:
                self._whole()
                read = self.read if self.read is not None else read_report(self.report)
                limit = SeriesLimit(self.options.max_series)
                try:
                    fams = shape(read, self.totals, self.options, limit, self.table)
                except BaseException:
                    self._forget_table()
                    raise
                self._finish(read, fams, limit)
            assert self._shaped is not None
            return self._shaped

    def shaping_steps(self) -> Iterator[None]:
        """``shaped`` in steps for the exporter's event loop: a yield between the parts of the report (see
        ``shape_steps``); the families are kept as ``shaped`` keeps them (raises ``MalformedReport``)."""
        with self._lock:
            if self._shaped is not None:
                return
            self._whole()
            read = self.read if self.read is not None else read_report(self.report)
        limit = SeriesLimit(self.options.max_series)
        try:
            fams = yield from shape_steps(read, self.totals, self.options, limit, self.table)
        except BaseException:  # malformed, or let go part way (closed)
            self._forget_table()
            raise
        with self._lock:
            if self._shaped is None:  # nobody shaped it meanwhile
                self._finish(read, fams, limit)
            elif self.guard is not None and self.guard.too_long(fams.families()):
                self._forget_table()  # shaped (and capped) meanwhile: these uncapped values must not stay

    def _whole(self) -> None:
        """With the lock held: the report decoded whole from ``line`` when it was counted from a thin version
        (``ExporterState.apply``; the typed values read while counting are the thin report's: dropped)."""
        line = self.line
        if line is not None:
            self.line = None
            self.read = None
            self.report = {}  # the thin report goes first (issue 32: never two trees of one line held)
            try:
                self.report = orjson.loads(line)
            except orjson.JSONDecodeError as e:  # never: the scanner takes only lines orjson takes
                raise MalformedReport(f"the report's line does not decode: {e}") from e

    def _forget_table(self) -> None:
        """Empty the label table after a shaping that did not finish: it may have filed label values over the cap
        (``_finish`` empties it when it finds them; an unfinished shaping never gets there)."""
        if self.table is not None:
            self.table.clear()

    def _finish(self, read: Report, fams: FamilySet, limit: SeriesLimit) -> None:
        """The rest of ``shaped`` (with the lock held): label caps, the series budget, and what is kept."""
        families = fams.families()
        if self.guard is not None and self.guard.too_long(families):
            self.truncated_labels = cap_strings(self.report, self.options.max_label_length)
            if self.table is not None:
                self.table.clear()  # it must not keep the long values (issue 32: nothing over the cap is held)
            limit = SeriesLimit(self.options.max_series)
            fams = shape(read_report(self.report), self.totals, self.options, limit, self.table)  # shortened
            families = fams.families()
        self.series_cut = self.series_cut or limit.cut
        if self.budget is not None:
            self.budget.thin(fams)
            families = fams.families()
        self._devices = _device_count(read)
        self.summary = summarize(read)
        self.read = None  # the families hold what is needed; drop the typed values
        self.report = {}  # and the report (issue 32: it is not held beside its families)
        self._shaped = Shaped(tuple(families), fams.series_count())

    def device_count(self) -> int | None:
        """``neuron_device_count`` of the report's hardware info (None when it has none)."""
        with self._lock:
            if self._shaped is not None:
                return self._devices
            self._whole()
            return _device_count(self.read if self.read is not None else read_report(self.report))


def _device_count(read: Report) -> int | None:
    hardware = read.hardware_info
    count = hardware.neuron_device_count if hardware is not None else None
    return count if isinstance(count, int) else None


def shape(
    report: Report,
    totals: Totals,
    options: ShapeOptions,
    limit: SeriesLimit | None = None,
    table: LabelTable | None = None,
) -> FamilySet:
    """The families of a report read through the schema (raises ``MalformedReport`` on any wrong type), as many
    series as ``limit`` takes (its ``cut`` tells whether some were left out): ``shape_steps`` run to its end.
    ``table``: label tuples kept from earlier reports (see ``context.LabelTable``; none: a fresh one)."""
    steps = shape_steps(report, totals, options, limit, table)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def shape_steps(
    report: Report,
    totals: Totals,
    options: ShapeOptions,
    limit: SeriesLimit | None = None,
    table: LabelTable | None = None,
) -> Generator[None, None, FamilySet]:
    """``shape`` with a yield after the host's families and after each runtime's (its value: the families), so
    that the exporter's loop can serve a request between two parts of a large report."""
    if report.problems:
        raise MalformedReport(report.problems.first())
    instance_info, hardware_info, k8s_info = report.instance_info, report.hardware_info, report.k8s_info
    for info in (instance_info, hardware_info, k8s_info):
        if info is not None and info.problems:
            raise MalformedReport(info.problems.first())
    if options.instance_labels_everywhere:
        inst_names, inst_values = instance_labels(instance_info)
    else:
        inst_names, inst_values = (), ()
    table = table if table is not None else LabelTable()
    table.start()
    ctx = ShapeContext(
        fams=FamilySet(),
        totals=totals,
        inst_names=inst_names,
        inst_values=inst_values,
        k8s=k8s_info is not None or options.always_k8s_labels,
        pods=PodMap(k8s_info, options.dra_claim_labels),
        cores_per_device=report.cores_per_device,
        core_device_label=options.core_device_label,
        limit=limit if limit is not None else SeriesLimit(options.max_series),
        full_detail=options.series_detail != BUDGET,
        table=table,
    )
    shape_system(ctx, report)
    shape_info(ctx, instance_info, hardware_info)
    shape_core_info(ctx, hardware_info)
    shape_daemon(ctx, report.monitor)
    shape_sources(ctx, report.sources)
    for entry in report.runtimes:
        yield
        if ctx.limit.cut:
            break  # the series limit is reached: later runtimes are left out whole
        RuntimeShaper(ctx, entry).shape()
    yield
    shape_core_totals(ctx)
    table.used = ctx.fams.series_count()
    return ctx.fams


class SnapshotBuilder:
    def __init__(self, options: ShapeOptions | None = None) -> None:
        self.options = options or ShapeOptions()
        self.ledger = CounterLedger()
        limit = self.options.max_label_length
        self.guard = LabelGuard(limit) if limit > 0 else None
        options = self.options
        self.budget = SeriesBudget(options.core_device_label) if options.series_detail == BUDGET else None
        self.table = LabelTable()  # label tuples kept from one report to the next (see ``context``)

    def ingest(self, report: dict[str, Any]) -> Snapshot:
        """Count a report; raises ``MalformedReport`` (and changes nothing) if a counted value is mistyped."""
        update = self.ledger.begin()
        counted = count_report(report, update, self.options.max_label_length, self.options.max_series)
        report_time = number(report.get("report_time"), "report_time")
        update.commit()
        return Snapshot(
            report=report,
            totals=self.ledger.totals,
            options=self.options,
            runtimes=counted.runtimes,
            min_period=counted.min_period,
            report_time=report_time,
            max_period=counted.max_period,
            bad_input=counted.bad,
            groups_seen=frozenset(counted.groups_seen),
            groups_failed=frozenset(counted.groups_failed),
            group_errors=counted.group_errors,
            read=counted.read,
            series_cut=counted.limit.cut,
            guard=self.guard,
            budget=self.budget,
            table=self.table,
        )
