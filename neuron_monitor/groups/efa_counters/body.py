"""The body of ``efa_counters``, defined once: the collector builds an `EfaCountersBody`, the spec reads these keys
(and names each known counter's Prometheus family and CloudWatch metric by `PORT_COUNTERS`).
``tests/groups/test_group_bodies.py`` checks that the constants are the TypedDicts' keys, that the spec describes
exactly the known counters, and that a collected body has exactly these keys, in this order.

Our own group (AWS's neuron-monitor has none like it). A port's ``counters`` are named as the kernel names its
counter files: whatever files the port has (``lifespan`` and names we do not accept left out, sysfs.py), so a
newer kernel's counter is reported without a change here; the known ones are `PORT_COUNTERS`.
"""

from __future__ import annotations

from typing import Final, TypedDict

from neuron_monitor.schema import names as N


class PortEntry(TypedDict):
    """One adapter port, in report order."""

    efa_device: str  # the RDMA device (``rdmap16s27``)
    port: str  # its port number as the kernel lists it ("1")
    pci_address: str  # the adapter's PCI function ("" when unknown)
    neuron_device_indexes: list[int]  # the Neuron devices the adapter serves (PCI topology join; [] unknown)
    state: str | None  # the port's logical state (ACTIVE when the link is up; ABSENT once gone); None: unread
    link_up: bool | None
    rate_gbps: float | None
    counters: dict[str, int]  # counter file name -> count over the period (a counter not read is left out)


class _Ports(TypedDict):
    efa_ports: list[PortEntry]  # every port seen since the daemon started


class EfaCountersBody(_Ports, total=False):
    """What one collection returns (the scheduler adds ``period`` and ``fresh``). The group writes its own
    ``error`` when something could not be read: a partial error, the rest still reported beside it."""

    error: str


EFA_PORTS: Final = "efa_ports"
ERROR: Final = N.ERROR
# a port's entry (PortEntry), in report order
EFA_DEVICE: Final = "efa_device"
PORT: Final = "port"
PCI_ADDRESS: Final = "pci_address"
NEURON_DEVICE_INDEXES: Final = "neuron_device_indexes"
STATE: Final = "state"
LINK_UP: Final = "link_up"
RATE_GBPS: Final = "rate_gbps"
COUNTERS: Final = "counters"
PORT_FIELDS: Final = (EFA_DEVICE, PORT, PCI_ADDRESS, NEURON_DEVICE_INDEXES, STATE, LINK_UP, RATE_GBPS, COUNTERS)

# The per-port counters of the kernel's EFA driver (drivers/infiniband/hw/efa/efa_verbs.c, EFA_DEFINE_PORT_STATS):
# the basic, message and RDMA read ones since Linux 5.x, RDMA write since 6.x, the network ones since 6.17.
TX_BYTES: Final = "tx_bytes"
TX_PKTS: Final = "tx_pkts"
RX_BYTES: Final = "rx_bytes"
RX_PKTS: Final = "rx_pkts"
RX_DROPS: Final = "rx_drops"
SEND_BYTES: Final = "send_bytes"
SEND_WRS: Final = "send_wrs"
RECV_BYTES: Final = "recv_bytes"
RECV_WRS: Final = "recv_wrs"
RDMA_READ_WRS: Final = "rdma_read_wrs"
RDMA_READ_BYTES: Final = "rdma_read_bytes"
RDMA_READ_WR_ERR: Final = "rdma_read_wr_err"
RDMA_READ_RESP_BYTES: Final = "rdma_read_resp_bytes"
RDMA_WRITE_WRS: Final = "rdma_write_wrs"
RDMA_WRITE_BYTES: Final = "rdma_write_bytes"
RDMA_WRITE_WR_ERR: Final = "rdma_write_wr_err"
RDMA_WRITE_RECV_BYTES: Final = "rdma_write_recv_bytes"
RETRANS_BYTES: Final = "retrans_bytes"
RETRANS_PKTS: Final = "retrans_pkts"
RETRANS_TIMEOUT_EVENTS: Final = "retrans_timeout_events"
UNRESPONSIVE_REMOTE_EVENTS: Final = "unresponsive_remote_events"
IMPAIRED_REMOTE_CONN_EVENTS: Final = "impaired_remote_conn_events"
PORT_COUNTERS: Final = (
    TX_BYTES,
    TX_PKTS,
    RX_BYTES,
    RX_PKTS,
    RX_DROPS,
    SEND_BYTES,
    SEND_WRS,
    RECV_BYTES,
    RECV_WRS,
    RDMA_READ_WRS,
    RDMA_READ_BYTES,
    RDMA_READ_WR_ERR,
    RDMA_READ_RESP_BYTES,
    RDMA_WRITE_WRS,
    RDMA_WRITE_BYTES,
    RDMA_WRITE_WR_ERR,
    RDMA_WRITE_RECV_BYTES,
    RETRANS_BYTES,
    RETRANS_PKTS,
    RETRANS_TIMEOUT_EVENTS,
    UNRESPONSIVE_REMOTE_EVENTS,
    IMPAIRED_REMOTE_CONN_EVENTS,
)
