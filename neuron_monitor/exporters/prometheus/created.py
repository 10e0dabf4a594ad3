"""``_created`` timestamps for the counters that Datadog's aws_neuron check and AWS's script expect them on.

With ``--created-series``, the counter families whose spec sets ``created`` (``execution_errors``,
``execution_status`` and ``hardware_ecc_events``) carry a ``<name>_created`` sample per series: the wall-clock time
(epoch seconds) the exporter received the report in which the series first appeared. A series that vanished (its
runtime exited) or whose value went down (a counter reset) gets a new creation time. AWS's script stamps the time
its client_python child was created, which it never resets; this follows the OpenMetrics meaning of the created
time more closely.
"""

from __future__ import annotations

from collections.abc import Iterable

from neuron_monitor.exporters.prometheus.families import Family
from neuron_monitor.schema.spec import counter_family


def _created(name: str) -> bool:
    family = counter_family(name)
    return family is not None and family.created


class CreatedClock:
    """Remembers (created time, last value) per series of the created families, across served reports."""

    def __init__(self) -> None:
        self._seen: dict[str, dict[tuple[str, ...], tuple[float, float]]] = {}

    def stamp(self, families: Iterable[Family], now: float) -> None:
        """Set ``created`` on the families of one newly served report (served reports come in order)."""
        seen: dict[str, dict[tuple[str, ...], tuple[float, float]]] = {}
        for fam in families:
            if not _created(fam.name):
                continue
            before = self._seen.get(fam.name, {})
            mine: dict[tuple[str, ...], tuple[float, float]] = {}
            for labels, value in fam.samples.items():
                prev = before.get(labels)
                mine[labels] = (now, value) if prev is None or value < prev[1] else (prev[0], value)
            fam.created = {labels: entry[0] for labels, entry in mine.items()}
            seen[fam.name] = mine
        self._seen = seen
