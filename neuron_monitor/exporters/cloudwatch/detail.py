"""The CloudWatch exporter's series detail (``--series-detail budget|full``), as the Prometheus exporter's.

Every distinct metric (name + dimensions) is a CloudWatch custom metric, billed per month (docs/cloudwatch.md,
"Cost"). The default ``budget`` sends what the Prometheus budget serves (docs/fleet.md, "The series budget": what
the shipped dashboards, alerts and recording rules read, and AWS's own families whole) and leaves out the same
detail; ``full`` sends every metric. Per datum, the budget:

- leaves out ``NeuronDeviceMemoryPeak*`` (high-water marks), ``NeuronHostMemoryUsed*`` (the driver's host memory per
  category; the runtimes' host total stays in ``RuntimeHostMemoryUsed``), ``RuntimeHostMemory*`` (the runtime's host
  memory by category) and ``NeuronDeviceHealthy`` (the driver's flag; the verdict ``DeviceHealthy`` carries it);
- keeps ``DeviceLatencyP50``/``P99`` of the seven device-latency percentiles (``ExecutionLatency*`` keeps all seven,
  as AWS's family) and ``NeuronDevicePowerUtilizationAvg`` of min/max/avg;
- sends a ``NeuronDeviceMemoryUsed*`` category of a device from its first non-zero value on (a category that never
  held memory adds nothing to a sum; once it has, it keeps being sent, so a graph shows its return to 0);
- keeps 7 of the 23 EFA port metrics, those the EFA alerts and the dashboard's EFA row read (EFA_BUDGET).

The first-non-zero memory is bounded (SEEN_MAX keys: 16 devices x 11 categories need 176); past it every such datum
is sent, as with ``full``.
"""

from __future__ import annotations

from neuron_monitor.exporters.cloudwatch.datum import Dims
from neuron_monitor.schema.spec import CwMetric

BUDGET = "budget"
FULL = "full"
SERIES_DETAILS = (BUDGET, FULL)

FULL_ONLY = frozenset({"NeuronDeviceMemoryPeak", "NeuronHostMemoryUsed", "RuntimeHostMemory", "NeuronDeviceHealthy"})
"""Metric (spec) names sent with ``full`` only."""

KEEP_ONLY = {
    "DeviceLatency": frozenset({"DeviceLatencyP50", "DeviceLatencyP99"}),
    "NeuronDevicePowerUtilization": frozenset({"NeuronDevicePowerUtilizationAvg"}),
}
"""Keyed metrics of which the budget sends only these names."""

FROM_FIRST_NONZERO = frozenset({"NeuronDeviceMemoryUsed"})
"""Keyed metrics whose series are sent from their first non-zero value on."""

EFA_BUDGET = frozenset(
    {
        "efa_tx_bytes",
        "efa_rx_bytes",
        "efa_tx_pkts",
        "efa_retrans_pkts",
        "efa_impaired_remote_conn_events",
        "efa_unresponsive_remote_events",
        "efa_link_up",
    }
)
"""The EFA port metrics the budget sends (the EFA alerts' and the dashboard's EFA row's, as the Prometheus budget)."""

SEEN_MAX = 65_536


class SeriesBudget:
    """Decides, datum by datum, whether the budget sends it; remembers the series already sent from a first
    non-zero value (one per exporter: a series, once sent, keeps being sent)."""

    def __init__(self) -> None:
        self._started: set[tuple[str, Dims]] = set()

    def keep(self, metric: CwMetric, name: str, dims: Dims, value: float) -> bool:
        base = metric.name
        if base in FULL_ONLY:
            return False
        only = KEEP_ONLY.get(base)
        if only is not None:
            return name in only
        if base.startswith("efa_"):
            return base in EFA_BUDGET
        if base in FROM_FIRST_NONZERO:
            key = (name, dims)
            if key in self._started or len(self._started) >= SEEN_MAX:
                return True
            if value == 0:
                return False
            self._started.add(key)
            return True
        return True
