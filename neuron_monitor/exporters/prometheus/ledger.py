"""Counters accumulated from per-period counts, each period added exactly once.

neuron-monitor reports counts over each group's captured period. A group is added when it is *fresh*: its
``fresh`` key says so (our daemon), or — for reports without it (AWS's daemon) — its ``period`` differs from the
one seen in the previous report for the same subject, since a carried-over group repeats its measured period.

The ledger is copy-on-write: ``begin`` returns a ``LedgerUpdate`` that records a report's additions beside the
committed totals, and only ``commit`` makes them the ledger's state, so a report rejected half-way leaves the
totals untouched. Subjects (a runtime tag, the system) that are not in a report are dropped with their totals:
the series of an exited runtime vanish, and a new runtime with the same tag starts again from zero.
"""

from __future__ import annotations

from typing import Any

Subject = tuple[str, ...]  # ("sys",) or ("rt", tag)
Totals = dict[Subject, dict[tuple[str, ...], float]]  # committed totals are never modified afterwards
SYSTEM: Subject = ("sys",)


class LedgerUpdate:
    """The additions of one report; reads see committed totals plus this report's additions."""

    def __init__(self, ledger: CounterLedger) -> None:
        self._ledger = ledger
        self.totals: Totals = {}
        self.periods: dict[tuple[Any, ...], float] = {}

    def is_fresh(self, obj: dict[str, Any], key: tuple[Any, ...]) -> bool:
        """Whether a group object carries newly collected counts (see the module docstring)."""
        period = obj.get("period")
        if isinstance(period, (int, float)) and not isinstance(period, bool):
            self.periods[key] = float(period)
        fresh = obj.get("fresh")
        if isinstance(fresh, bool):
            return fresh
        previous = self._ledger.periods.get(key)
        return previous is None or previous != self.periods.get(key)

    def _subject(self, subject: Subject) -> dict[tuple[str, ...], float]:
        mine = self.totals.get(subject)
        if mine is None:
            mine = dict(self._ledger.totals.get(subject, ()))
            self.totals[subject] = mine
        return mine

    def add(self, subject: Subject, key: tuple[str, ...], amount: float) -> None:
        totals = self._subject(subject)
        totals[key] = totals.get(key, 0.0) + amount

    def touch(self, subject: Subject) -> dict[tuple[str, ...], float]:
        """Mark a subject present in this report and return its totals (committed + added)."""
        return self._subject(subject)

    def commit(self) -> None:
        """Make this report's totals the ledger's; subjects not touched by it are dropped."""
        self._ledger.totals = self.totals
        self._ledger.periods = self.periods


class CounterLedger:
    def __init__(self) -> None:
        self.totals: Totals = {}
        self.periods: dict[tuple[Any, ...], float] = {}

    def begin(self) -> LedgerUpdate:
        return LedgerUpdate(self)
