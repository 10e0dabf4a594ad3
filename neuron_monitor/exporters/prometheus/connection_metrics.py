"""``neuron_exporter_connections_closed_total{reason}``: the connections the HTTP front closed, by why.

A client that does not read its response within the write timeout (``write_timeout``), one whose request head
did not arrive in time (``header_timeout``), a keep-alive connection idle too long (``idle_timeout``), one
dropped to make room past the connection limit (``evicted``) and one refused because every other was waiting
on its handler (``refused``). Read per scrape from ``server.HTTPFront.closes`` on the loop thread, where every
request is answered.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from neuron_monitor.exporters.prometheus.families import COUNTER, Family
from neuron_monitor.exporters.prometheus.server import CLOSE_REASONS, HTTPFront

NAME = "neuron_exporter_connections_closed"
HELP = "Connections the exporter closed, by reason (write_timeout: a response not read in time)"


class ConnectionMetrics(Collector):
    """The close counts of ``front`` (set once the front exists; none before)."""

    def __init__(self) -> None:
        self.front: HTTPFront | None = None

    def collect(self) -> Iterator[Metric]:
        closes = self.front.closes if self.front is not None else dict.fromkeys(CLOSE_REASONS, 0)
        samples: dict[tuple[str, ...], float] = {(r,): float(closes.get(r, 0)) for r in CLOSE_REASONS}
        yield Family(NAME, COUNTER, HELP, ("reason",), samples).to_metric()
