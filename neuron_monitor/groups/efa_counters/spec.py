"""``efa_counters`` (system): per EFA adapter port, the kernel's hardware counters as per-period counts, link state
and rate, and the Neuron devices the adapter serves (PCI topology join; empty when unknown).

Its ``error`` may be partial: it names the counters an older kernel or adapter does not expose, counter files that
could not be read or held no valid count, ports that are gone, and a join that could not be made; everything else
is reported beside it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from neuron_monitor.groups.efa_counters import body as B
from neuron_monitor.schema import spec as S
from neuron_monitor.schema.values import Problems, entries, mapping, number, sequence, text

# ---- the body's keys are in body.py ---------------------------------------------------------------------------
NAME: Final = "efa_counters"

# Each known counter (body.py's PORT_COUNTERS, the kernel's names): (its name, CloudWatch agent metric name,
# CloudWatch unit, help).
_BYTES = S.BYTES
PORT_COUNTER_INFO: Final[tuple[tuple[str, str, str, str], ...]] = (
    (B.TX_BYTES, "efa_tx_bytes", _BYTES, "Bytes transmitted"),
    (B.TX_PKTS, "efa_tx_pkts", S.COUNT, "Packets transmitted"),
    (B.RX_BYTES, "efa_rx_bytes", _BYTES, "Bytes received"),
    (B.RX_PKTS, "efa_rx_pkts", S.COUNT, "Packets received"),
    (B.RX_DROPS, "efa_rx_dropped", S.COUNT, "Received packets dropped"),
    (B.SEND_BYTES, "efa_send_bytes", _BYTES, "Bytes sent by send operations"),
    (B.SEND_WRS, "efa_send_wrs", S.COUNT, "Send work requests completed"),
    (B.RECV_BYTES, "efa_recv_bytes", _BYTES, "Bytes received by receive operations"),
    (B.RECV_WRS, "efa_recv_wrs", S.COUNT, "Receive work requests completed"),
    (B.RDMA_READ_WRS, "efa_rdma_read_wrs", S.COUNT, "RDMA read work requests completed"),
    (B.RDMA_READ_BYTES, "efa_rdma_read_bytes", _BYTES, "Bytes read by RDMA read operations"),
    (B.RDMA_READ_WR_ERR, "efa_rdma_read_wr_err", S.COUNT, "RDMA read work requests that failed"),
    (B.RDMA_READ_RESP_BYTES, "efa_rdma_read_resp_bytes", _BYTES, "Bytes sent in responses to RDMA reads"),
    (B.RDMA_WRITE_WRS, "efa_rdma_write_wrs", S.COUNT, "RDMA write work requests completed"),
    (B.RDMA_WRITE_BYTES, "efa_rdma_write_bytes", _BYTES, "Bytes written by RDMA write operations"),
    (B.RDMA_WRITE_WR_ERR, "efa_rdma_write_wr_err", S.COUNT, "RDMA write work requests that failed"),
    (B.RDMA_WRITE_RECV_BYTES, "efa_rdma_write_recv_bytes", _BYTES, "Bytes received by remote RDMA writes"),
    (B.RETRANS_BYTES, "efa_retrans_bytes", _BYTES, "Bytes retransmitted"),
    (B.RETRANS_PKTS, "efa_retrans_pkts", S.COUNT, "Packets retransmitted"),
    (B.RETRANS_TIMEOUT_EVENTS, "efa_retrans_timeout_events", S.COUNT, "Retransmission timeouts"),
    (B.UNRESPONSIVE_REMOTE_EVENTS, "efa_unresponsive_remote_events", S.COUNT, "Remote peers that stopped answering"),
    (B.IMPAIRED_REMOTE_CONN_EVENTS, "efa_impaired_remote_conn_events", S.COUNT, "Connections to remote peers "
     "found impaired"),
)  # fmt: skip


@dataclass(slots=True)
class EfaPort:
    device: str
    port: str
    pci_address: str
    neuron_devices: list[int]
    state: str | None
    link_up: bool | None
    rate_gbps: float | None
    counts: dict[str, float] = field(default_factory=dict)  # counter -> count over the period

    @property
    def neuron_label(self) -> str:
        """The ``neuron_device_index`` label: the devices the adapter serves, comma-separated ("" unknown)."""
        return ",".join(map(str, self.neuron_devices))


@dataclass(slots=True)
class EfaCounters:
    ports: list[EfaPort]


def _port(raw: Any, problems: Problems, where: str) -> EfaPort | None:
    d = mapping(raw, problems, where, "", counted=True)
    if d is None:
        return None
    device = text(d.get(B.EFA_DEVICE), problems, where, B.EFA_DEVICE, counted=True)
    port = text(d.get(B.PORT), problems, where, B.PORT, counted=True)
    if not device or not port:
        return None
    pci = d.get(B.PCI_ADDRESS)
    neurons = [i for i in (sequence(d.get(B.NEURON_DEVICE_INDEXES), problems, where, B.NEURON_DEVICE_INDEXES) or ())
               if i.__class__ is int and i >= 0]  # fmt: skip
    state = d.get(B.STATE)
    link = d.get(B.LINK_UP)
    rate = d.get(B.RATE_GBPS)
    counts: dict[str, float] = {}
    cwhere = f"{where}.{B.COUNTERS}"
    for name, value in (mapping(d.get(B.COUNTERS), problems, where, B.COUNTERS, counted=True) or {}).items():
        cls = value.__class__
        if cls is int or cls is float:
            if value >= 0:
                counts[name] = value
            continue
        v = number(value, problems, cwhere, name, True)
        if v is not None and v >= 0:
            counts[name] = v
    return EfaPort(
        device,
        port,
        pci if isinstance(pci, str) else "",
        neurons,
        state if isinstance(state, str) else None,
        link if isinstance(link, bool) else None,
        number(rate, problems, where, B.RATE_GBPS) if rate is not None else None,
        counts,
    )


def read(body: dict[str, Any], where: str, problems: Problems) -> EfaCounters:
    return EfaCounters(entries(body, B.EFA_PORTS, problems, where, _port))


# ---- Prometheus -----------------------------------------------------------------------------------------------
_LABELS = ("efa_device", "port", "neuron_device_index")
# what the default series budget serves (what the alerts and the dashboard row use; the rest with full detail)
IN_BUDGET: Final = frozenset({B.TX_BYTES, B.RX_BYTES, B.TX_PKTS, B.RETRANS_PKTS, B.IMPAIRED_REMOTE_CONN_EVENTS,
                              B.UNRESPONSIVE_REMOTE_EVENTS})  # fmt: skip
FAM_COUNTERS: Final = {
    name: S.PromFamily(f"efa_{name}", S.COUNTER, f"{doc} by the EFA adapter port", S.INSTANCE_SCOPE, _LABELS,
                       drops_unlisted=True, budget=S.FULL if name in IN_BUDGET else S.DETAIL)
    for name, _, _, doc in PORT_COUNTER_INFO
}  # fmt: skip
FAM_LINK_UP = S.PromFamily(
    "efa_link_up", S.GAUGE, "1 when the EFA adapter port's link is ACTIVE, else 0", S.INSTANCE_SCOPE, _LABELS
)
FAM_RATE = S.PromFamily(
    "efa_link_rate_bits_per_second",
    S.GAUGE,
    "The EFA adapter port's link rate",
    S.INSTANCE_SCOPE,
    _LABELS,
    budget=S.DETAIL,
)


def gauges(value: EfaCounters) -> Iterator[S.PromSample]:
    for p in value.ports:
        key = (p.device, p.port)
        if p.link_up is not None:
            yield S.PromSample(FAM_LINK_UP, key, {p.neuron_label: 1.0 if p.link_up else 0.0}, 1.0, ())
        if p.rate_gbps is not None:
            yield S.PromSample(FAM_RATE, key, {p.neuron_label: p.rate_gbps * 1e9}, 1.0, ())


def counts(value: EfaCounters, period: float) -> Iterator[S.PromCount]:
    for p in value.ports:
        key = (p.device, p.port)
        label = p.neuron_label
        for name, count in p.counts.items():
            fam = FAM_COUNTERS.get(name)
            if fam is not None:
                yield S.PromCount(fam, key, {label: count}, 1.0)


# ---- CloudWatch: the CloudWatch agent's EFA metric names and dimensions (device, port) -------------------------
CW_COUNTERS: Final = {
    name: S.CwMetric(cw, unit, S.HOST_DIMS, key_dims=("device", "port")) for name, cw, unit, _ in PORT_COUNTER_INFO
}
CW_LINK_UP = S.CwMetric("efa_link_up", "None", S.HOST_DIMS, additive=False, key_dims=("device", "port"))


def datums(value: EfaCounters, period: float, per_vcpu: bool) -> Iterator[S.CwDatum]:
    for p in value.ports:
        key = (p.device, p.port)
        for name, count in p.counts.items():
            metric = CW_COUNTERS.get(name)
            if metric is not None:
                yield metric, key, "", count
        if p.link_up is not None:
            yield CW_LINK_UP, key, "", 1.0 if p.link_up else 0.0


# ---- the timeline ---------------------------------------------------------------------------------------------
# bytes per second moved (tx + rx) and packets per second retransmitted, per EFA port on the host's track; each
# Neuron device's track gets the throughput of the adapter(s) that serve it
TRACK_BYTES = S.Track("EFA bytes/s", "efa", "bytes/s", S.HOST_TRACK, per_second=True, digits=0)
TRACK_RETRANS = S.Track("EFA retransmits/s", "efa_retrans", "packets/s", S.HOST_TRACK, per_second=True, digits=1)
TRACK_DEVICE_BYTES = S.Track("EFA bytes/s", "efa", "bytes/s", S.DEVICE_TRACK, per_second=True, digits=0)


def _moved(p: EfaPort) -> float:
    return p.counts.get(B.TX_BYTES, 0.0) + p.counts.get(B.RX_BYTES, 0.0)


def per_device_bytes(value: EfaCounters) -> dict[int, float]:
    """Neuron device -> bytes moved over the period by the adapter ports that serve it (a port serving two
    devices counts for each: the link is shared, not split)."""
    out: dict[int, float] = {}
    for p in value.ports:
        for d in p.neuron_devices:
            out[d] = out.get(d, 0.0) + _moved(p)
    return out


def timeline(value: EfaCounters) -> Iterator[S.TimelineSample]:
    moved: dict[str, float] = {}
    retrans: dict[str, float] = {}
    for p in value.ports:
        series = f"{p.device}/{p.port}"
        moved[series] = _moved(p)
        if B.RETRANS_PKTS in p.counts:
            retrans[series] = p.counts[B.RETRANS_PKTS]
    if moved:
        yield TRACK_BYTES, (), moved
    if retrans:
        yield TRACK_RETRANS, (), retrans
    for d, v in sorted(per_device_bytes(value).items()):
        yield TRACK_DEVICE_BYTES, (str(d),), {"bytes": v}


# ---- neuron-monitor-det ---------------------------------------------------------------------------------------
STORM_RATIO: Final = 0.01  # retransmitted / transmitted packets over a period from which a port is in a storm
STORM_MIN_PACKETS: Final = 100  # and at least this many retransmits (an idle port's few retries are no storm)
DET_STORM = S.DetRule(
    "efa_retransmit_storm",
    S.HOST_TRACK,
    S.WARNING,
    f"an EFA port retransmitted at least {STORM_RATIO:.0%} of its packets in a period (congested or failing "
    "fabric path; collectives slow down while the NeuronCores still look busy)",
)
DET_IMPAIRED = S.DetRule(
    "efa_impaired_remote_connections",
    S.HOST_TRACK,
    S.WARNING,
    "an EFA port found connections to remote peers impaired or unresponsive",
)
DET_LINK_DOWN = S.DetRule(
    "efa_link_down", S.HOST_TRACK, S.ERROR, "an EFA port's link is not ACTIVE, or the port vanished",
    episode=S.STATE_EPISODES,
)  # fmt: skip


def subject(p: EfaPort) -> str:
    """How det and the trace name a port: ``EFA rdmap16s27 port 1`` (+ the Neuron devices it serves)."""
    served = f" (neuron device {p.neuron_label})" if p.neuron_devices else ""
    return f"EFA {p.device} port {p.port}{served}"


def in_storm(p: EfaPort) -> bool:
    retrans = p.counts.get(B.RETRANS_PKTS, 0.0)
    return retrans >= STORM_MIN_PACKETS and retrans >= STORM_RATIO * max(p.counts.get(B.TX_PKTS, 0.0), 1.0)


def findings(value: EfaCounters) -> Iterator[S.DetFinding]:
    for p in value.ports:
        key = (subject(p),)
        if in_storm(p):
            details = {B.RETRANS_PKTS: p.counts[B.RETRANS_PKTS], B.TX_PKTS: p.counts.get(B.TX_PKTS, 0.0)}
            yield DET_STORM, key, p.counts[B.RETRANS_PKTS], details
        impaired = p.counts.get(B.IMPAIRED_REMOTE_CONN_EVENTS, 0.0) + p.counts.get(B.UNRESPONSIVE_REMOTE_EVENTS, 0.0)
        if impaired > 0:
            yield DET_IMPAIRED, key, impaired, {B.IMPAIRED_REMOTE_CONN_EVENTS: impaired}
        if p.link_up is not None:
            yield DET_LINK_DOWN, key, 0.0 if p.link_up else 1.0, {"state": [p.state or "?"]}


# ---- neuron-monitor-top: each Neuron device's network throughput ----------------------------------------------
COL_EFA = S.TopColumn(S.TOP_DEVICES, "efa", 9, order=40)


def _rate(bytes_per_s: float) -> str:
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if bytes_per_s >= size:
            return f"{bytes_per_s / size:.1f}{unit}"
    return f"{bytes_per_s:.0f}B/s"


def top(value: EfaCounters, period: float | None) -> Iterator[S.TopCell]:
    if not period or period <= 0:
        return
    trouble = {d for p in value.ports if p.link_up is False or in_storm(p) for d in p.neuron_devices}
    for d, moved in sorted(per_device_bytes(value).items()):
        yield COL_EFA, (str(d),), _rate(moved / period), "bold red" if d in trouble else ""


# the start of the group's error on a host without EFA adapters (inf2, trn1.2xlarge): not a failure
NO_ADAPTERS: Final = "no EFA adapters under /sys/class/infiniband"


SPEC = S.GroupSpec(
    name=NAME,
    placement=S.SYSTEM,
    read=read,
    doc=__doc__ or "",
    partial_errors=True,
    absent_error=NO_ADAPTERS,
    prometheus=(*FAM_COUNTERS.values(), FAM_LINK_UP, FAM_RATE),
    gauges=gauges,
    counts=counts,
    cloudwatch=(*CW_COUNTERS.values(), CW_LINK_UP),
    datums=datums,
    tracks=(TRACK_BYTES, TRACK_RETRANS, TRACK_DEVICE_BYTES),
    timeline=timeline,
    det_rules=(DET_STORM, DET_IMPAIRED, DET_LINK_DOWN),
    findings=findings,
    top_columns=(COL_EFA,),
    top=top,
)
