"""System group ``vcpu_usage``: per-vCPU and average CPU time shares over the period, and context switches.

Reads ``<root>/proc/stat`` through a kept descriptor; percentages are deltas of each field over the delta of
all fields (user, nice, system, idle, iowait, irq, softirq, steal), rounded to 2 decimals as AWS prints them.
``context_switch_count`` is the ``ctxt`` delta over the period (a per-period counter).
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import sub
from typing import Any

from neuron_monitor.groups.base import GroupError, SystemGroup
from neuron_monitor.host.procfs import ProcStat, parse_stat
from neuron_monitor.host.rootfs import RootFS

_OUT_FIELDS = ("user", "nice", "system", "idle", "io_wait", "irq", "soft_irq")


def shares_of(delta: tuple[int, ...]) -> dict[str, float]:
    """Shares of each field (CPU_FIELDS order) in the total time that passed, in percent rounded half-up to 2
    decimals. A field that went back (CPU hot-unplug and re-plug) counts as 0. Integer arithmetic: one float
    division per field."""
    u, n, s, i, w, q, sq, st = delta
    if u < 0 or n < 0 or s < 0 or i < 0 or w < 0 or q < 0 or sq < 0 or st < 0:
        u, n, s, i, w, q, sq, st = (max(d, 0) for d in delta)
    total = u + n + s + i + w + q + sq + st
    if total <= 0:
        return dict.fromkeys(_OUT_FIELDS, 0.0)
    t2 = 2 * total
    return {
        "user": (u * 20000 + total) // t2 / 100,
        "nice": (n * 20000 + total) // t2 / 100,
        "system": (s * 20000 + total) // t2 / 100,
        "idle": (i * 20000 + total) // t2 / 100,
        "io_wait": (w * 20000 + total) // t2 / 100,
        "irq": (q * 20000 + total) // t2 / 100,
        "soft_irq": (sq * 20000 + total) // t2 / 100,
    }


def usage_percent(prev: tuple[int, ...], cur: tuple[int, ...]) -> dict[str, float]:
    """Shares of the time between two samples of one CPU's counters (see `shares_of`)."""
    return shares_of(tuple(map(sub, cur, prev)))


_SHARES_CACHE_MAX = 4096


class VcpuUsage(SystemGroup):
    """At high frequency a vCPU's delta is a handful of clock ticks, so the same deltas recur across vCPUs and
    periods (idle ones, saturated ones): each distinct delta's shares are computed once and the dict is shared
    (bodies are never mutated). All per-vCPU work is batched over the flat counters: one subtraction map, one
    grouping into 8-tuples, one cache lookup map; only new deltas cost Python-level arithmetic."""

    type_name = "vcpu_usage"

    def __init__(self, root: RootFS) -> None:
        super().__init__(root)
        self._file = root.open_kept("proc/stat")
        self._prev: ProcStat | None = None
        self._shares: dict[tuple[int, ...], dict[str, float]] = {}
        self._names: tuple[tuple[int, ...], tuple[str, ...]] = ((), ())

    def _read(self) -> ProcStat:
        try:
            return parse_stat(self._file.read())
        except OSError as e:
            raise GroupError(f"open {self._file.path}: {e.strerror or e}") from None
        except ValueError as e:
            raise GroupError(f"parse {self._file.path}: {e}") from None

    def prime(self) -> None:
        try:
            self._prev = self._read()
        except GroupError:
            self._prev = None

    def _per_cpu(self, prev: ProcStat, cur: ProcStat) -> dict[str, dict[str, float]]:
        deltas: Iterator[int]
        if cur.cpu_ids == prev.cpu_ids:
            ids, deltas = cur.cpu_ids, map(sub, cur.counters, prev.counters)
        else:  # a vCPU went offline or came back: pair the CPUs present in both samples
            before = prev.cpus
            ids = tuple(c for c in cur.cpu_ids if c in before)
            now = cur.cpus
            deltas = (d for c in ids for d in map(sub, now[c], before[c]))
        if self._names[0] != ids:
            self._names = (ids, tuple(map(str, ids)))
        cache = self._shares
        if len(cache) > _SHARES_CACHE_MAX:
            cache.clear()
        keys = list(zip(*[iter(deltas)] * 8, strict=True))
        shares: list[Any] = list(map(cache.get, keys))  # None where not cached yet, filled below
        if None in shares:
            for j, got in enumerate(shares):
                if got is None:
                    shares[j] = cache[keys[j]] = shares_of(keys[j])
        return dict(zip(self._names[1], shares, strict=True))

    def collect(self) -> dict[str, Any]:
        cur = self._read()
        prev = self._prev
        self._prev = cur
        if prev is None:
            raise GroupError("no previous sample of /proc/stat yet; usage starts with the next period")
        return {
            "average_usage": usage_percent(prev.total, cur.total),
            "usage_data": self._per_cpu(prev, cur),
            "context_switch_count": max(cur.ctxt - prev.ctxt, 0),
        }

    def close(self) -> None:
        self._file.close()


GROUP = VcpuUsage
