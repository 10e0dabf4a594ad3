"""System group ``efa_counters``: the hardware counters, link state and rate of every EFA adapter port, each
joined to the Neuron devices it serves.

Reads, through the root, ``sys/class/infiniband/<adapter>/ports/<port>/{hw_counters/*,state,rate}`` of every RDMA
device bound to the ``efa`` driver (sysfs.py) and the PCI topology join (topology.py). The kernel prints counts
since the adapter was set up; this group reports per-period counts by the project's counter rule
(util/counters.py, docs/neuron-data.md "Cumulative counters"): the change since its previous collection, the first
period counting from the baseline taken at start. A counter that went back was reset (the adapter was reset or the
driver reloaded): its count is the new value, never negative. A step past what an adapter can count in the elapsed
time (`EFA_COUNTER`), or a value in the top half of 64 bits, is named in ``error`` and not counted. A counter the
kernel does not expose on this host (the network counters came with Linux 6.17 and need a recent adapter) is named
in ``error`` and the others are still reported; so is a counter file that holds anything but an unsigned 64-bit
decimal, or cannot be read; the first good read after an unread or refused one is a new baseline. An RDMA device
whose ``device`` link loops or points outside ``sys/devices`` is named in ``error``, never left out in silence.
An adapter port
that disappears is reported with state ``ABSENT`` and ``link_up`` false until the daemon restarts. No adapter at
all is an ``error`` with an empty body.

Cost: the adapters, their ports and counter files are found again only when the adapter listing (or, for the join, the
Neuron device listing or the DRA addresses published by the pod-resources watcher) changes or a read failed (the
driver's BDF ioctl is asked once per device at each such time); each collection reads every file with one pread on its
kept descriptor, checks the bytes in one pass and computes the counts with C-level maps (bench/bench_efa.py).
The body's keys and types: body.py."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from neuron_monitor.groups.base import SystemGroup
from neuron_monitor.groups.efa_counters import body as B
from neuron_monitor.groups.efa_counters import sysfs as F
from neuron_monitor.groups.efa_counters import topology as T
from neuron_monitor.groups.efa_counters.body import EfaCountersBody, PortEntry
from neuron_monitor.groups.efa_counters.spec import NO_ADAPTERS
from neuron_monitor.host.rootfs import KeptFile, RootFS
from neuron_monitor.neuron.pci import dra_efa_addresses
from neuron_monitor.neuron.sysfs import DriverTree
from neuron_monitor.util.counters import HALF_U64, Source, steps
from neuron_monitor.util.errors import GroupError

log = logging.getLogger(__name__)

_READ_SIZE = 64  # every file here is far shorter; a longer one takes the careful path
MAX_PORTS = 16  # ports read per adapter (every EFA adapter has one); each keeps about 23 descriptors
_LISTING_MAX_AGE = 1.0  # seconds an adapter listing is used again (as the Neuron device listing)
_DIGITS = b"0123456789\n"
ABSENT = "ABSENT"
# What an EFA hardware counter can count (util/counters.py): 10^12 per second (bytes: 8 Tb/s, 20 times the fastest
# EFA port of 2026, 400 Gb/s; packets and events are fewer), a burst of a minute's worth, and no value in the top
# half of 64 bits (at 400 Gb/s a byte count takes 5.8 years to get there).
EFA_COUNTER = Source(rate=1e12, burst=60e12, top=HALF_U64)


@dataclass
class _Port:
    device: str
    port: str
    pci_address: str
    neuron_devices: list[int]
    counters: tuple[str, ...]  # the counter files present, sorted
    start: int  # index of its first counter in the plan's counter slots
    missing: tuple[str, ...]  # known counters without a file
    state_raw: bytes | None = None
    state: F.PortState | None = None
    rate_raw: bytes | None = None
    rate: float | None = None


@dataclass
class _Plan:
    names: list[str]  # the adapter listing it was made for
    neurons: tuple[int, ...]  # the Neuron device listing it was made for
    dra: dict[int, str]  # the DRA device -> EFA adapter addresses it was made with (the published object)
    ports: list[_Port] = field(default_factory=list)
    counter_files: list[KeptFile] = field(default_factory=list)  # every port's counters, port by port
    state_files: list[KeptFile | None] = field(default_factory=list)  # per port
    rate_files: list[KeptFile | None] = field(default_factory=list)  # per port
    fds: list[int] = field(default_factory=list)  # counter descriptors (the fast pass reads them in order)
    errors: list[str] = field(default_factory=list)  # what the plan found missing

    def keys(self) -> list[tuple[str, str, str]]:
        return [(p.device, p.port, name) for p in self.ports for name in p.counters]

    def close(self) -> None:
        for f in (*self.counter_files, *self.state_files, *self.rate_files):
            if f is not None:
                f.close()


def _listing(root: RootFS) -> list[str]:
    try:
        return root.listdir(F.INFINIBAND, _LISTING_MAX_AGE)
    except OSError:
        return []


def _ranges(items: Iterable[str]) -> str:
    return ", ".join(items)


class EfaCounters(SystemGroup):
    type_name = "efa_counters"

    def __init__(self, root: RootFS) -> None:
        super().__init__(root)
        self.tree = DriverTree(root)
        self._plan: _Plan | None = None
        self._prev: list[int | None] = []  # per counter slot of the plan: its baseline (None: the next read is one)
        self._last_time: float | None = None  # monotonic time of the previous read
        self._seen: dict[tuple[str, str], tuple[str, list[int]]] = {}  # ports ever seen: (pci, neuron devices)

    # -- finding the files ----------------------------------------------------------------------------------
    def _make_plan(self, names: list[str], neurons: tuple[int, ...], dra: dict[int, str]) -> _Plan:
        root = self.root
        plan = _Plan(names, neurons, dra)
        places = T.neuron_places(root, neurons, dra)
        if neurons and not any(p.known for p in places.values()):  # a fact about the host, not a failed collection
            log.info(
                "efa_counters: no PCI path for any Neuron device (%s): neuron_device_index left empty",
                places[neurons[0]].why,
            )
        missing: dict[tuple[str, ...], list[str]] = {}
        adapters, refused = F.find_adapters(root)
        plan.errors += refused
        for device in adapters:
            adapter_rel = f"{F.INFINIBAND}/{device}"
            chain = T.pci_chain(root, f"{adapter_rel}/device")
            pci = chain[-1] if chain else ""
            served = list(T.served_by(pci, chain, places))
            ports = F.list_ports(root, device)
            if not ports:
                plan.errors.append(f"{device}: no ports listed")
            if len(ports) > MAX_PORTS:  # the descriptor budget (docs/performance.md, "Descriptors")
                plan.errors.append(
                    f"{device}: {len(ports)} ports listed, only the first {MAX_PORTS} read (an EFA adapter has one)"
                )
                ports = ports[:MAX_PORTS]
            for port in ports:
                rel = F.port_rel(device, port)
                names_here = F.list_counters(root, device, port)
                if names_here is None:
                    plan.errors.append(f"{device} port {port}: no hw_counters directory")
                    names_here = []
                kept: list[str] = []
                for name in names_here:
                    try:
                        f = root.open_kept(f"{rel}/hw_counters/{name}", _READ_SIZE)
                        plan.fds.append(f.fileno())
                    except OSError as e:
                        plan.errors.append(f"{name} of {device} port {port}: {e.strerror or e}")
                        continue
                    plan.counter_files.append(f)
                    kept.append(name)
                gone = tuple(c for c in B.PORT_COUNTERS if c not in names_here)
                if gone and names_here:
                    missing.setdefault(gone, []).append(f"{device} port {port}")
                p = _Port(device, port, pci, served, tuple(kept), len(plan.fds) - len(kept), gone)
                plan.ports.append(p)
                plan.state_files.append(
                    root.open_kept(f"{rel}/state", _READ_SIZE) if root.exists(f"{rel}/state") else None
                )
                plan.rate_files.append(
                    root.open_kept(f"{rel}/rate", _READ_SIZE) if root.exists(f"{rel}/rate") else None
                )
                self._seen[(device, port)] = (pci, served)
        for gone, where in missing.items():
            plan.errors.append(f"{_ranges(gone)} not exposed by the kernel for {_ranges(where)}")
        return plan

    def _kept(self, rel: str) -> KeptFile | None:
        return self.root.open_kept(rel, _READ_SIZE) if self.root.exists(rel) else None

    def _current_plan(self) -> _Plan:
        names = _listing(self.root)
        neurons = self.tree.device_indexes()
        dra = dra_efa_addresses()
        plan = self._plan
        if plan is not None and names == plan.names and neurons == plan.neurons and dra is plan.dra:
            return plan
        new = self._make_plan(names, neurons, dra)
        self._carry_over(plan, new)
        if plan is not None:
            plan.close()
        self._plan = new
        return new

    def _carry_over(self, old: _Plan | None, new: _Plan) -> None:
        """The previous values of the counters both plans read (by adapter, port and name); new counters get a
        baseline at their first read (None here)."""
        before = dict(zip(old.keys(), self._prev, strict=False)) if old is not None else {}
        self._prev_pending = [before.get(k) for k in new.keys()]  # noqa: SIM118 - a method, not a dict

    _prev_pending: list[int | None] | None = None

    # -- reading --------------------------------------------------------------------------------------------
    @staticmethod
    def _read_fast(plan: _Plan) -> list[int] | None:
        """Every counter: one pread each, checked in one pass; None when anything is unusual."""
        pread = os.pread
        try:
            raws = [pread(fd, _READ_SIZE, 0) for fd in plan.fds]
        except OSError:
            return None
        if not raws:
            return []
        if max(map(len, raws)) >= _READ_SIZE or b"".join(raws).translate(None, _DIGITS):
            return None
        try:
            values = list(map(int, raws))
        except ValueError:  # an empty file, or two numbers in one
            return None
        if max(values) > F.COUNTER_MAX:
            return None
        return values

    @staticmethod
    def _read_careful(plan: _Plan, errors: list[str]) -> tuple[list[int | None], bool]:
        """Every counter file on its own: a value, or None with the reason in ``errors``; and whether every
        descriptor still worked (False: find the files again next time)."""
        out: list[int | None] = []
        alive = True
        for p in plan.ports:
            for k, name in enumerate(p.counters):
                f = plan.counter_files[p.start + k]
                try:
                    out.append(F.parse_counter(f.read()))
                except OSError as e:
                    out.append(None)
                    alive = False
                    errors.append(f"{name} of {p.device} port {p.port}: {e.strerror or e}")
                except ValueError as e:
                    out.append(None)
                    errors.append(f"{name} of {p.device} port {p.port}: {e}")
        return out, alive

    def _values(self, plan: _Plan, errors: list[str]) -> list[int | None]:
        fast = self._read_fast(plan)
        if fast is not None:
            return cast(list[int | None], fast)
        values, alive = self._read_careful(plan, errors)
        if not alive:
            self.root.forget_listing(F.INFINIBAND)
            plan.names = []  # look again at the next collection
        return values

    def prime(self) -> None:
        try:
            plan = self._current_plan()
        except OSError:
            return
        self._last_time = time.monotonic()
        self._prev = self._counts(plan, self._values(plan, []), [])[1]  # every good read a baseline, nothing counted

    def _counts(
        self, plan: _Plan, values: list[int | None], errors: list[str]
    ) -> tuple[list[int | None], list[int | None]]:
        """Per-period counts from ``values`` (None where unread) and the previous values (util/counters.py's rule:
        the first good read after an unread or refused one is a baseline), and the next baselines; refused
        readings named in ``errors``. Does not keep the baselines (the caller does)."""
        now = time.monotonic()
        dt = 0.0 if self._last_time is None else max(0.0, now - self._last_time)
        self._last_time = now
        pending, self._prev_pending = self._prev_pending, None
        prev = pending if pending is not None else self._prev
        if len(prev) != len(values):
            prev = [None] * len(values)
        counts, baselines, refused = steps(prev, values, dt, EFA_COUNTER)
        if None in counts:  # a new baseline counts 0 (nothing yet); unread and refused counters stay out
            counts = [0 if c is None and b is not None else c for c, b in zip(counts, baselines, strict=True)]
        if refused:
            where = [(p, name) for p in plan.ports for name in p.counters]
            for i, problem in refused:
                port, name = where[i]
                errors.append(f"{name} of {port.device} port {port.port}: {problem}")
        return counts, baselines

    @staticmethod
    def _link(plan: _Plan, i: int, errors: list[str]) -> None:
        """Refresh port ``i``'s state and rate from their files (parsed again only when the bytes changed)."""
        p = plan.ports[i]
        for kind, f in (("state", plan.state_files[i]), ("rate", plan.rate_files[i])):
            if f is None:
                errors.append(f"{kind} of {p.device} port {p.port}: not exposed")
                continue
            try:
                raw = f.read()
                if kind == "state":
                    if raw != p.state_raw:
                        p.state_raw, p.state = raw, None
                        p.state = F.parse_state(raw)
                elif raw != p.rate_raw:
                    p.rate_raw, p.rate = raw, None
                    p.rate = F.parse_rate(raw)
            except OSError as e:
                errors.append(f"{kind} of {p.device} port {p.port}: {e.strerror or e}")
            except ValueError as e:
                errors.append(f"{kind} of {p.device} port {p.port}: {e}")

    def collect(self) -> dict[str, Any]:
        plan = self._current_plan()
        if not plan.ports and not self._seen:
            if plan.errors:  # RDMA devices refused (a looping or escaping device link): not an absent source
                raise GroupError("no EFA adapter read: " + "; ".join(plan.errors))
            raise GroupError(f"{NO_ADAPTERS} (no EFA interface attached, or the efa driver is not loaded)")
        errors = list(plan.errors)
        counts, self._prev = self._counts(plan, self._values(plan, errors), errors)
        entries: list[PortEntry] = []
        present = set()
        for i, p in enumerate(plan.ports):
            present.add((p.device, p.port))
            self._link(plan, i, errors)
            here = counts[p.start : p.start + len(p.counters)]
            if None in here:  # a counter not read, or refused: left out
                values = {n: c for n, c in zip(p.counters, here, strict=True) if c is not None}
            else:
                values = dict(zip(p.counters, cast("list[int]", here), strict=True))
            entry: PortEntry = {
                B.EFA_DEVICE: p.device,
                B.PORT: p.port,
                B.PCI_ADDRESS: p.pci_address,
                B.NEURON_DEVICE_INDEXES: p.neuron_devices,
                B.STATE: p.state.name if p.state is not None else None,
                B.LINK_UP: p.state.up if p.state is not None else None,
                B.RATE_GBPS: p.rate,
                B.COUNTERS: values,
            }
            entries.append(entry)
        for (device, port), (pci, served) in self._seen.items():
            if (device, port) not in present:
                errors.append(f"{device} port {port} is gone")
                entries.append({
                    B.EFA_DEVICE: device, B.PORT: port, B.PCI_ADDRESS: pci, B.NEURON_DEVICE_INDEXES: served,
                    B.STATE: ABSENT, B.LINK_UP: False, B.RATE_GBPS: None, B.COUNTERS: {},
                })  # fmt: skip
        body: EfaCountersBody = {B.EFA_PORTS: entries}
        if errors:
            body[B.ERROR] = "; ".join(errors)
        return cast("dict[str, Any]", body)  # SystemGroup.collect's plain dict (no copy)

    def close(self) -> None:
        if self._plan is not None:
            self._plan.close()
            self._plan = None


GROUP = EfaCounters
