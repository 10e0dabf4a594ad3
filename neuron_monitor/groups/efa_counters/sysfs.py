"""Typed readers of the kernel's RDMA sysfs for EFA adapters (facts and public sources: docs/neuron-data.md).

Under ``sys/class/infiniband/<device>/`` the kernel's RDMA core publishes, per port ``ports/<port>/``:

- ``hw_counters/<name>``: one driver counter per file, printed ``"%llu\\n"`` (an unsigned 64-bit count since the
  adapter was set up); ``hw_counters/lifespan`` is the counters' cache time in milliseconds, not a counter;
- ``state``: ``"<code>: <NAME>\\n"`` with NAME one of NOP, DOWN, INIT, ARMED, ACTIVE, ACTIVE_DEFER;
- ``rate``: ``"<Gb/s>[.5] Gb/sec (<width>X<speed>)\\n"``, e.g. ``"100 Gb/sec (4X EDR)"``.

Each parser takes the bytes of one file and returns a plain value or raises ``ValueError`` naming what is wrong
(the caller puts that in the group's ``error``). `list_adapters` and `list_ports` return the EFA adapters and
their ports below a root; `port_files` the files of one port. Nothing here keeps state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from neuron_monitor.groups.efa_counters.topology import driver_name, link_problem
from neuron_monitor.host.rootfs import RootFS

INFINIBAND = "sys/class/infiniband"
COUNTER_MAX = (1 << 64) - 1  # the kernel prints u64 values
PORT_STATES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
ACTIVE = 4
NOT_COUNTERS = frozenset({"lifespan"})  # hw_counters/lifespan: the cache time of the counters, in ms
EFA_DRIVER = "efa"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # device, port and counter names we accept
_STATE = re.compile(rb"\s*(\d{1,3})\s*:\s*([A-Z_]{1,16})\s*")
_RATE = re.compile(rb"\s*(\d{1,6})(\.5)?\s+Gb/sec(?:\s+\((\d{1,2})X\s*([A-Z0-9]{0,8})\))?\s*")
_PARTS = re.compile(r"\d+|\D+")
_COUNTER = re.compile(rb"[0-9]{1,20}\n?")


@dataclass(frozen=True, slots=True)
class PortState:
    """The port's logical state: the kernel's code and name (ACTIVE when the link is up)."""

    code: int
    name: str

    @property
    def up(self) -> bool:
        return self.code == ACTIVE


def parse_counter(raw: bytes) -> int:
    """``b"12345\\n"`` -> 12345; ValueError for anything but one unsigned decimal that fits 64 bits."""
    if not _COUNTER.fullmatch(raw):
        raise ValueError(f"expected an unsigned 64-bit decimal, got {raw[:24]!r}")
    value = int(raw)
    if value > COUNTER_MAX:
        raise ValueError(f"{raw[:24].strip().decode()} is past 64 bits")
    return value


def parse_state(raw: bytes) -> PortState:
    """``b"4: ACTIVE\\n"`` -> PortState(4, "ACTIVE"); ValueError otherwise (an unknown code keeps its printed name)."""
    m = _STATE.fullmatch(raw)
    if m is None:
        raise ValueError(f"expected '<code>: <STATE>', got {raw[:40]!r}")
    return PortState(int(m.group(1)), m.group(2).decode())


def parse_rate(raw: bytes) -> float:
    """``b"100 Gb/sec (4X EDR)\\n"`` -> 100.0 (Gb/s); ValueError otherwise."""
    m = _RATE.fullmatch(raw)
    if m is None:
        raise ValueError(f"expected '<n> Gb/sec (<w>X<speed>)', got {raw[:40]!r}")
    return int(m.group(1)) + (0.5 if m.group(2) else 0.0)


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders the numbers in a name by value (rdmap3s0 before rdmap11s0)."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in _PARTS.findall(name))


def valid_name(name: str) -> bool:
    """A device, port or counter name we report (printable ASCII, at most 64 characters, no path parts)."""
    return _NAME.fullmatch(name) is not None


def list_adapters(root: RootFS) -> list[str]:
    """The EFA adapters below the root, sorted (`find_adapters` without what it refused)."""
    return find_adapters(root)[0]


def find_adapters(root: RootFS) -> tuple[list[str], list[str]]:
    """The EFA adapters below the root, sorted: RDMA devices whose PCI function is bound to the ``efa`` driver
    (or, when the driver link is unreadable, whose name starts with ``efa``); and, for the error, each RDMA device
    left out because its ``device`` link loops or points outside ``sys/devices`` (it may be an adapter: it is
    never left out in silence). ([], []) when there is no RDMA class."""
    try:
        names = sorted(root.listdir(INFINIBAND), key=natural_key)
    except OSError:
        return [], []
    out: list[str] = []
    refused: list[str] = []
    for name in names:
        if not valid_name(name):
            continue
        rel = f"{INFINIBAND}/{name}"
        problem = link_problem(root, f"{rel}/device")
        if problem is not None:
            refused.append(f"{name}: {problem}; not read")
            continue
        driver = driver_name(root, rel)
        if driver == EFA_DRIVER or (driver is None and name.startswith("efa")):
            out.append(name)
    return out, refused


def list_ports(root: RootFS, device: str) -> list[str]:
    """The adapter's port numbers as sysfs names them (``"1"``), in numeric order; [] when unreadable."""
    try:
        names = root.listdir(f"{INFINIBAND}/{device}/ports")
    except OSError:
        return []
    return sorted((n for n in names if n.isdigit() and len(n) <= 3), key=int)


def port_rel(device: str, port: str) -> str:
    return f"{INFINIBAND}/{device}/ports/{port}"


def list_counters(root: RootFS, device: str, port: str) -> list[str] | None:
    """The counter files of one port (``lifespan`` left out), sorted; None when there is no hw_counters
    directory. Names we do not accept (not printable ASCII, too long) are left out."""
    try:
        names = root.listdir(f"{port_rel(device, port)}/hw_counters")
    except OSError:
        return None
    return sorted(n for n in names if n not in NOT_COUNTERS and valid_name(n))
