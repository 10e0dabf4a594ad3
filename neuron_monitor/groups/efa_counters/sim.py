"""The simulator's part for ``efa_counters`` (contract: sim/part.py): the simulated host's EFA adapters, PCI
functions beside the Neuron devices, the kernel's RDMA class tree, and counters driven by the workload (facts and
public sources: docs/neuron-data.md).

What is created (below the root), for a shape with ``efa_adapters`` adapters and ``devices`` Neuron devices:

- one PCIe switch per adapter below root port ``0000:00:<s+1>.0``: the adapter's PCI function and the Neuron
  devices that share the switch (devices split evenly: 2 per switch on a trn1.32xlarge, 1 on trn1n/trn2), each a
  directory ``sys/devices/pci0000:00/<root port>/<upstream>/<downstream>/<function>`` with ``vendor``, ``device``
  and a ``driver`` link to ``sys/bus/pci/drivers/{efa,neuron}``;
- per adapter ``<function>/infiniband/rdmap<bus>s0/`` (linked from ``sys/class/infiniband``) with ``device``
  (its PCI function) and port ``ports/1/``: ``state``, ``phys_state``, ``rate`` and ``hw_counters/*`` with the
  counters of the kernel's EFA driver (``counter_set``: "full", or "no_network" for kernels before the network
  counters, or "basic" for kernels before RDMA write too) and ``lifespan``;
- the kernel's ``sys/bus/pci/devices/<address>`` link to every function, and per Neuron device the answer of the
  driver's ``NEURON_IOCTL_DEVICE_BDF_EXT`` ioctl (its PCI address) in ``dev/neuron-sim/neuronN.bdf_ext``
  (neuron/pci.py), so the join of adapters to Neuron devices works as with the driver as shipped; with the option
  ``bdf_ioctl`` false the file holds ``EINVAL``, the answer of a driver without the ioctl, and the join is unknown;
- with ``neuron_pci_parent``, a ``device`` link in each Neuron class device to its PCI function. The public Neuron
  driver creates its class devices without a parent, so by default there is none, as on a real host.

Traffic: every step each port moves collective traffic in proportion to how busy the Neuron devices it serves
are (the busy share of their physical cores times 60 % of the link rate), split into send/receive and RDMA
read/write; a small share is retransmitted. Faults: a retransmit storm on an adapter (a share of its packets
retransmitted, with timeouts), impaired remote connections (events, and as many unresponsive remotes), a link
down (state DOWN, no traffic) and up again, and a counter reset (the adapter starts counting from 0). Files are
rewritten at the simulator's sysfs interval, in place. Commands: ``efa_retrans_storm`` (``adapter``, ``share``),
``efa_retrans_clear``, ``efa_impaired`` (``adapter``, ``count``), ``efa_link_down``, ``efa_link_up``, ``efa_reset``
(``adapter``). Options: ``efa_counter_set``, ``neuron_pci_parent``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuron_monitor.neuron.pci import pack_answer, sim_answer_rel
from neuron_monitor.sim.part import Host, SimPart
from neuron_monitor.sim.shapes import Shape
from neuron_monitor.sim.tree import SYSFS_DEVICES, ReopenedFile, TreeBuilder

PCI_ROOT = "sys/devices/pci0000:00"
PCI_DEVICES = "sys/bus/pci/devices"
BASIC = ("tx_bytes", "tx_pkts", "rx_bytes", "rx_pkts", "rx_drops", "send_bytes", "send_wrs", "recv_bytes",
         "recv_wrs", "rdma_read_wrs", "rdma_read_bytes", "rdma_read_wr_err", "rdma_read_resp_bytes")  # fmt: skip
RDMA_WRITE = ("rdma_write_wrs", "rdma_write_bytes", "rdma_write_wr_err", "rdma_write_recv_bytes")
NETWORK = ("retrans_bytes", "retrans_pkts", "retrans_timeout_events", "unresponsive_remote_events",
           "impaired_remote_conn_events")  # fmt: skip
COUNTER_SETS = {"full": BASIC + RDMA_WRITE + NETWORK, "no_network": BASIC + RDMA_WRITE, "basic": BASIC}
AWS_VENDOR = "0x1d0f\n"
EFA_DEVICE_ID = "0xefa1\n"
NEURON_DEVICE_ID = "0x7064\n"
FAULT_KINDS = ("efa_retrans_storm", "efa_retrans_clear", "efa_impaired", "efa_link_down", "efa_link_up", "efa_reset")
MTU = 8192  # bytes per packet the simulation assumes
WR_BYTES = 1 << 20  # bytes per work request
LINK_SHARE = 0.6  # share of the link rate a fully busy device's collectives use
BASE_RETRANS = 1e-5  # share of packets retransmitted on a healthy fabric


def _link(builder: TreeBuilder, link: Path, target: Path) -> None:
    """A relative symlink at ``link`` to ``target`` (kept if there is one)."""
    builder.make(str(link.parent))
    if not os.path.islink(link):
        os.symlink(os.path.relpath(target, link.parent), builder.new(str(link)))


@dataclass
class Adapter:
    name: str
    pci: str
    neuron_devices: list[int]
    rate_gbps: int
    counters: dict[str, int] = field(default_factory=dict)
    acc: dict[str, float] = field(default_factory=dict)
    files: dict[str, ReopenedFile] = field(default_factory=dict)
    state: ReopenedFile | None = None
    phys_state: ReopenedFile | None = None
    link_up: bool = True
    storm: float = 0.0  # share of packets retransmitted during a storm (0: none)
    written: dict[str, int] = field(default_factory=dict)  # the counters as the files hold them


class EfaTree:
    """The EFA part of a simulated host: its files and its counters."""

    def __init__(
        self, root: Path, shape: Shape, options: Mapping[str, Any], builder: TreeBuilder | None = None
    ) -> None:
        self.root = root
        self.builder = builder = builder or TreeBuilder()
        self.counter_set = COUNTER_SETS[str(options.get("efa_counter_set", "full"))]
        self.adapters: list[Adapter] = []
        n = shape.efa_adapters
        switches = max(n, 1)
        for s in range(switches):
            bus = 1 + s * 8
            rp = f"0000:00:{s + 1:02x}.0"
            upstream = f"0000:{bus:02x}:00.0"
            base = root / PCI_ROOT / rp / upstream
            serves = [d for d in range(shape.devices) if d * switches // max(shape.devices, 1) == s]
            endpoints: list[tuple[str, str]] = []  # (function, kind)
            if n:
                endpoints.append((f"0000:{bus + 2:02x}:00.0", "efa"))
            endpoints += [(f"0000:{bus + 3 + k:02x}:00.0", f"neuron{d}") for k, d in enumerate(serves)]
            for k, (function, kind) in enumerate(endpoints):
                fdir = base / f"0000:{bus + 1:02x}:{k:02x}.0" / function
                builder.write(f"{fdir}/vendor", AWS_VENDOR)
                builder.write(f"{fdir}/device", EFA_DEVICE_ID if kind == "efa" else NEURON_DEVICE_ID)
                driver = "efa" if kind == "efa" else "neuron"
                drivers = root / "sys/bus/pci/drivers" / driver
                builder.make(str(drivers))
                _link(builder, fdir / "driver", drivers)
                _link(builder, drivers / function, fdir)
                _link(builder, root / PCI_DEVICES / function, fdir)
                if kind == "efa":
                    self.adapters.append(self._adapter(fdir, function, bus + 2, serves, shape))
                    continue
                answer = pack_answer(function) if options.get("bdf_ioctl", True) else b"EINVAL\n"
                builder.write(str(root / sim_answer_rel(int(kind[len("neuron") :]))), answer)
                if options.get("neuron_pci_parent"):
                    _link(builder, root / SYSFS_DEVICES / kind / "device", fdir)

    def _adapter(self, fdir: Path, function: str, bus: int, serves: list[int], shape: Shape) -> Adapter:
        name = f"rdmap{bus}s0"
        ib = fdir / "infiniband" / name
        builder = self.builder
        _link(builder, self.root / "sys/class/infiniband" / name, ib)
        _link(builder, ib / "device", fdir)
        builder.write(f"{ib}/node_type", "1: CA\n")
        port = f"{ib}/ports/1"
        a = Adapter(name, function, serves, shape.efa_rate_gbps)
        builder.write(f"{port}/rate", f"{a.rate_gbps} Gb/sec (4X HDR)\n")
        builder.write(f"{port}/hw_counters/lifespan", "10\n")
        a.state = ReopenedFile(builder.new(f"{port}/state"), b"4: ACTIVE\n")
        a.phys_state = ReopenedFile(builder.new(f"{port}/phys_state"), b"5: LinkUp\n")
        for c in self.counter_set:
            a.counters[c] = 0
            a.files[c] = ReopenedFile(builder.new(f"{port}/hw_counters/{c}"), b"0\n")
        return a

    # -- animation ------------------------------------------------------------------------------------------
    def step(self, dt: float, busy: dict[int, float]) -> None:
        """Advance every port by ``dt`` seconds of traffic; ``busy``: Neuron device -> busy share 0..1."""
        for a in self.adapters:
            if not a.link_up or not a.neuron_devices:
                continue
            share = sum(busy.get(d, 0.0) for d in a.neuron_devices) / len(a.neuron_devices)
            moved = a.rate_gbps * 1e9 / 8 * LINK_SHARE * share * dt
            if moved <= 0:
                continue
            self._add(a, "tx_bytes", moved)
            self._add(a, "rx_bytes", moved)
            pkts = moved / MTU
            self._add(a, "tx_pkts", pkts)
            self._add(a, "rx_pkts", pkts)
            for kind, part in (("send", 0.1), ("recv", 0.1)):
                self._add(a, f"{kind}_bytes", moved * part)
                self._add(a, f"{kind}_wrs", moved * part / WR_BYTES)
            self._add(a, "rdma_write_bytes", moved * 0.6)
            self._add(a, "rdma_write_recv_bytes", moved * 0.6)
            self._add(a, "rdma_write_wrs", moved * 0.6 / WR_BYTES)
            self._add(a, "rdma_read_bytes", moved * 0.3)
            self._add(a, "rdma_read_resp_bytes", moved * 0.3)
            self._add(a, "rdma_read_wrs", moved * 0.3 / WR_BYTES)
            retrans = pkts * (a.storm or BASE_RETRANS)
            self._add(a, "retrans_pkts", retrans)
            self._add(a, "retrans_bytes", retrans * MTU)
            if a.storm:
                self._add(a, "retrans_timeout_events", retrans * 0.001)

    def _add(self, a: Adapter, name: str, amount: float) -> None:
        if name not in a.counters:
            return
        acc = a.acc.get(name, 0.0) + amount
        k = int(acc)
        a.acc[name] = acc - k
        a.counters[name] += k

    def write(self) -> None:
        """Rewrite every counter file that changed (in place)."""
        for a in self.adapters:
            for name, f in a.files.items():
                f.write(b"%d\n" % a.counters[name])
            a.written = dict(a.counters)

    def apply(self, kind: str, cmd: dict[str, Any]) -> str:
        """Apply one EFA fault; returns why it cannot apply ("" when applied)."""
        i = int(cmd.get("adapter", 0))
        if not 0 <= i < len(self.adapters):
            return f"no EFA adapter {i}"
        a = self.adapters[i]
        if kind == "efa_retrans_storm":
            a.storm = float(cmd.get("share", 0.05))
        elif kind == "efa_retrans_clear":
            a.storm = 0.0
        elif kind == "efa_impaired":
            if "impaired_remote_conn_events" not in a.counters:
                return f"{a.name} has no network counters (counter set without them)"
            count = int(cmd.get("count", 1))
            self._add(a, "impaired_remote_conn_events", count)
            self._add(a, "unresponsive_remote_events", count)
        elif kind in ("efa_link_down", "efa_link_up"):
            a.link_up = kind == "efa_link_up"
            assert a.state is not None and a.phys_state is not None
            a.state.write(b"4: ACTIVE\n" if a.link_up else b"1: DOWN\n")
            a.phys_state.write(b"5: LinkUp\n" if a.link_up else b"3: Disabled\n")
        elif kind == "efa_reset":
            a.counters = dict.fromkeys(a.counters, 0)
            a.acc.clear()
        else:
            return f"unknown EFA command {kind!r}"
        self.write()
        return ""

    def totals(self) -> dict[str, dict[str, int]]:
        """Ground truth: the counters of each port (``<adapter>/1``) as written last."""
        return {f"{a.name}/1": dict(a.written) for a in self.adapters}


class EfaPart(SimPart):
    """The EFA tree on the simulator's clock: traffic every step, files at the sysfs interval."""

    commands = FAULT_KINDS

    def __init__(self, name: str, host: Host) -> None:
        super().__init__(name, host)
        self.efa = EfaTree(host.root, host.shape, host.options, host.builder)

    def step(self, now: float, dt: float) -> None:
        if self.efa.adapters:
            self.efa.step(dt, self.host.busy_share(now))

    def write(self, now: float) -> None:
        self.efa.write()

    def apply(self, kind: str, command: dict[str, Any], detail: dict[str, Any]) -> str:
        error = self.efa.apply(kind, command)
        if not error:
            detail.update(adapter=int(command.get("adapter", 0)))
        return error

    def device_removed(self, device: int) -> None:
        """The driver's ioctl answer goes with the device."""
        with contextlib.suppress(FileNotFoundError):
            (self.host.root / sim_answer_rel(device)).unlink()

    def totals(self) -> dict[str, Any]:
        return {"efa": self.efa.totals()}


PART = EfaPart
