"""The per-report series limit (``--max-series-per-report``), as Prometheus's own ``sample_limit`` for a scrape.

A report's series are counted as they are made, in report order: first while its counters are counted
(``counting``), then while its families are shaped (``snapshot``). Once a report reaches the limit, the rest of
its series are left out -- the rest of the batch that crossed it, then every later group and runtime -- before
any per-series state is built for them, so the memory a report costs is bounded by the limit, not by what the
report lists (one runtime listing 50,000 NeuronCores would make about 600,000 series). The exporter counts each
report it cuts (``neuron_exporter_bad_input_total{reason="series_limit"}``) and logs it at most once a minute.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import TypeVar

# A trn2.48xlarge with 16 runtimes makes about 3,350 series at --series-detail full, 128 one-core runtimes about
# 6,900; 256 runtimes (MAX_RUNTIMES) on 12 cores each about 37,800 by default. Past 40,000 the families of one
# runtime listing 50,000 cores would outgrow 10x its report line in the exporter (docs/prometheus.md).
DEFAULT_MAX_SERIES = 40_000

K = TypeVar("K")
V = TypeVar("V")


class SeriesLimit:
    """Counts one report's series against ``limit`` (0: no limit); ``cut`` once some were left out."""

    __slots__ = ("count", "cut", "limit")

    def __init__(self, limit: int = 0) -> None:
        self.limit = limit
        self.count = 0
        self.cut = False

    def take(self, values: Mapping[K, V]) -> Mapping[K, V]:
        """``values`` whole while they fit under the limit, else the first of them that fit (none once full)."""
        if self.limit <= 0:
            return values
        count = self.count + len(values)
        if count <= self.limit:
            self.count = count
            return values
        keep = self.limit - self.count
        self.count = self.limit
        self.cut = True
        return dict(itertools.islice(values.items(), keep))

    def take_one(self) -> bool:
        """Count one series; False (and ``cut``) when it does not fit."""
        if self.limit <= 0:
            return True
        if self.count < self.limit:
            self.count += 1
            return True
        self.cut = True
        return False
