"""The ingest pass: add a report's per-period counts to the counter ledger, and note group health.

The report is read through the schema's read layer (``neuron_monitor.schema``); only the groups whose spec has
``counts`` are read here, and each spec's ``counts`` names what its counters add. A count problem (a counted value
or the envelope of the wrong type) raises ``MalformedReport`` before the ledger update is committed. Gauges are
shaped later, when the report is first served (``snapshot``). Each group object's freshness decides whether its
counts are added (see ``ledger``).

Counters never lie: a well-typed but impossible per-period value is dropped (not added) and counted by reason in
``CountResult.bad`` -- ``negative``, ``non_finite`` (NaN or infinity, which a JSON parser other than orjson may
let through) or ``absurd`` (over the family's ``limit``: ``MAX_COUNT_PER_PERIOD`` events, a FLOP rate over
``MAX_FLOPS`` per core, a CPU percentage over ``MAX_PERCENT``, or a period over ``MAX_PERIOD``). The rest of the
report is applied, so every served counter only grows, by finite amounts, and stays finite.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from neuron_monitor.exporters.prometheus.labelcap import DEFAULT_MAX_LABEL_LENGTH, truncate
from neuron_monitor.exporters.prometheus.ledger import SYSTEM, LedgerUpdate, Subject
from neuron_monitor.exporters.prometheus.series_limit import SeriesLimit
from neuron_monitor.exporters.prometheus.values import MalformedReport
from neuron_monitor.native import NATIVE
from neuron_monitor.schema import names as N
from neuron_monitor.schema.read import Group, Report, read_report
from neuron_monitor.schema.spec import (
    CORE_SCOPE,
    MAX_COUNT_PER_PERIOD,
    MAX_FLOPS,
    MAX_PERCENT,
    MAX_PERIOD,
    GroupSpec,
    registry,
)
from neuron_monitor.schema.values import Problems

__all__ = [
    "MAX_COUNT_PER_PERIOD",
    "MAX_FLOPS",
    "MAX_PERCENT",
    "MAX_PERIOD",
    "CountResult",
    "count_report",
    "thin_native",
]


def check_amount(value: float, limit: float, bad: Counter[str]) -> float | None:
    """``value`` when it is a possible amount (finite, 0..limit), else None with the reason counted in ``bad``."""
    if 0.0 <= value <= limit:
        return value
    if math.isnan(value) or math.isinf(value):
        bad["non_finite"] += 1
    elif value < 0:
        bad["negative"] += 1
    else:
        bad["absurd"] += 1
    return None


def reject_on(problems: Problems) -> None:
    """Raise ``MalformedReport`` when a counted value (or the envelope) has the wrong type."""
    if problems.counts:
        raise MalformedReport(problems.counts[0])


@dataclass
class CountResult:
    groups_seen: set[str] = field(default_factory=set)
    groups_failed: set[str] = field(default_factory=set)
    group_errors: Counter[str] = field(default_factory=Counter)
    bad: Counter[str] = field(default_factory=Counter)
    min_period: float = 0.0
    max_period: float = 0.0
    runtimes: int = 0
    label_limit: int = DEFAULT_MAX_LABEL_LENGTH  # ledger keys are label values: capped as shaping caps them
    read: Report | None = None  # the report as read (its groups' counted bodies read and cached)
    limit: SeriesLimit = field(default_factory=SeriesLimit)  # counters counted against --max-series-per-report

    def label(self, value: str) -> str:
        limit = self.label_limit
        return value if limit <= 0 or len(value) <= limit else truncate(value, limit)

    def check(self, group: Group, fresh: bool) -> bool:
        """Record a group's period and error; True when its data may be used."""
        self.groups_seen.add(group.name)
        period = group.period
        if period is not None and 0 < period <= MAX_PERIOD:
            self.min_period = period if self.min_period <= 0 else min(self.min_period, period)
            self.max_period = max(self.max_period, period)
        if group.error:
            if group.absent:  # the host has none of this source (no EFA adapter): an empty body, not a failure
                return False
            self.groups_failed.add(group.name)
            if fresh:
                self.group_errors[group.name] += 1
            return group.usable
        return True


def count_report(
    report: dict[str, Any], update: LedgerUpdate, label_limit: int = DEFAULT_MAX_LABEL_LENGTH, max_series: int = 0
) -> CountResult:
    """Add ``report``'s counts to ``update``; past ``max_series`` counters (0: no limit) the rest of the report's
    counters are left out, in report order, and later runtimes are not touched (see ``series_limit``)."""
    read = read_report(report)
    reject_on(read.problems)
    result = CountResult(label_limit=label_limit, read=read, limit=SeriesLimit(max_series))
    totals = update.touch(SYSTEM)
    for name, group in read.system.items():
        fresh = update.is_fresh(group.body, ("sys", name))
        if result.check(group, fresh) and group.spec.counts is not None:
            _count_group(group, fresh, totals, result)
    k8s = read.k8s_info  # not a system_data group but a collected one all the same (--k8s-info): its error shows
    if k8s is not None:
        result.groups_seen.add(N.NEURON_K8S_INFO)
        if k8s.error:
            result.groups_failed.add(N.NEURON_K8S_INFO)
            result.group_errors[N.NEURON_K8S_INFO] += 1  # each report reads the watcher's current state afresh
    result.runtimes = len(read.runtimes)
    for entry in read.runtimes:
        if result.limit.cut:
            break  # the series limit is reached: later runtimes are left out (and dropped from the ledger)
        tag = result.label(entry.tag)
        subject: Subject = ("rt", tag)
        totals = update.touch(subject)
        if entry.error:
            result.groups_seen.add("runtime")
            result.groups_failed.add("runtime")
            result.group_errors["runtime"] += 1
            continue
        for name, group in entry.groups.items():
            fresh = update.is_fresh(group.body, (entry.pid_label, tag, name))
            if result.check(group, fresh) and group.spec.counts is not None:
                _count_group(group, fresh, totals, result)
    return result


def _count_group(group: Group, fresh: bool, totals: dict[tuple[str, ...], float], result: CountResult) -> None:
    """Add one usable group's counts (zero when it is not fresh, so its series exist) to ``totals``."""
    counts = group.spec.counts
    if counts is None:
        return
    data, problems = group.read()
    reject_on(problems)
    period = 0.0
    if group.spec.counts_use_period and group.period is not None:
        period = check_amount(group.period, MAX_PERIOD, result.bad) or 0.0
    label, limit = result.label, result.label_limit
    listed: dict[str, set[str]] = {}
    series = result.limit
    for family, prefix, values, factor in counts(data, period):
        if series.limit:
            if series.cut:
                break
            values = series.take(values)
        name, most = family.name, family.limit
        if prefix:
            if limit > 0 and any(len(p) > limit for p in prefix):
                prefix = tuple(map(label, prefix))
            if family.drops_unlisted:
                listed.setdefault(name, set()).add(prefix[0])
        keyed = bool(family.labels) or family.scope == CORE_SCOPE  # else one value, keyed by the prefix alone
        add_counts_native(totals, (name, *prefix), values, factor if fresh else 0.0, most, keyed, result)
    for family in group.spec.dropping:
        named = listed.get(family.name, set())
        for counter in [k for k in totals if k[0] == family.name and k[1] not in named]:
            del totals[counter]  # e.g. a device no longer listed


def add_counts_native(
    totals: dict[tuple[str, ...], float],
    head: tuple[str, ...],
    values: Mapping[str, float],
    scale: float,
    most: float,
    keyed: bool,
    result: CountResult,
) -> None:
    """``add_counts_plain`` in the compiled helper when it takes the values (every one a plain amount within
    ``most``, every key within the label cap: nothing to count as bad, nothing to cut), else the twin."""
    if NATIVE is None or NATIVE.add_counts(totals, head, values, scale, most, result.label_limit, keyed) is None:
        add_counts_plain(totals, head, values, scale, most, keyed, result)


def add_counts_plain(
    totals: dict[tuple[str, ...], float],
    head: tuple[str, ...],
    values: Mapping[str, float],
    scale: float,
    most: float,
    keyed: bool,
    result: CountResult,
) -> None:
    """Add one count's ``values`` times ``scale`` to ``totals``: each under ``head + (key,)`` (the key capped as
    a label) when ``keyed``, else all under ``head``; an impossible value is counted in ``result.bad`` instead."""
    bad = result.bad
    if not keyed:
        for value in values.values():
            if 0.0 <= value <= most or check_amount(value, most, bad) is not None:
                totals[head] = totals.get(head, 0.0) + value * scale
        return
    label, limit = result.label, result.label_limit
    for key, value in values.items():
        if 0.0 <= value <= most or check_amount(value, most, bad) is not None:
            counter = head + (key if limit <= 0 or len(key) <= limit else label(key),)  # noqa: RUF005 - faster
            totals[counter] = totals.get(counter, 0.0) + value * scale


# What counting never reads of a report, for ``thin_native``, as the helper's rules: (group, steps), each step a
# (names, negate) pair a member's key matches (negated: every key but the names); the last step's values are
# replaced by null. Counting reads every group's envelope (``period``, ``error``, ``fresh``, and for a partial
# error whether other keys are there: they stay) and the bodies of the groups whose spec counts (or counts
# devices: ``state.has_device_data``) but for the part their spec names ``uncounted`` (left for the gauges).
# test_prom_thin_native checks the counting of mutated lines both ways.
Step = tuple[tuple[bytes, ...], bool]
Rule = tuple[bytes, tuple[Step, ...]]
_BESIDE_ENVELOPE: tuple[Step, ...] = ((tuple(k.encode() for k in N.ENVELOPE_KEYS), True),)
_thin_rules: tuple[tuple[Rule, ...], tuple[Rule, ...]] | None = None


def _rules() -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
    """The helper's rules for system_data's groups and for a runtime's (see above), made on first use."""
    global _thin_rules
    if _thin_rules is None:
        specs = registry()

        def rules(groups: dict[str, GroupSpec[Any]]) -> tuple[Rule, ...]:
            out: list[Rule] = []
            for name, spec in groups.items():
                if spec.counts is None and spec.device_count is None:
                    out.append((name.encode(), _BESIDE_ENVELOPE))
                elif spec.uncounted and spec.device_count is None:
                    steps = tuple((tuple(k.encode() for k in keys), negated) for keys, negated in spec.uncounted)
                    out.append((name.encode(), steps))
            return tuple(out)

        _thin_rules = (rules(specs.system), rules(specs.runtime))
    return _thin_rules


def thin_native(line: bytes) -> bytes | None:
    """``line`` with the values counting never reads replaced by ``null`` (the compiled helper's scanner checks the
    whole line on the way and declines anything orjson might refuse), or None: then the line is decoded whole
    (the twin). Counting the thin report gives what counting the whole one does (test_prom_thin_native); a report
    published is decoded whole again from its line (``Snapshot.line``)."""
    if NATIVE is None:
        return None
    system, runtime = _rules()
    return NATIVE.thin_report(line, system, runtime)
