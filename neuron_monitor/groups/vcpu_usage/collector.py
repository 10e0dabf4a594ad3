"""System group ``vcpu_usage``: per-vCPU and average CPU time shares over the period, and context switches.

Reads ``<root>/proc/stat`` through a kept descriptor; percentages are deltas of each field over the delta of
all fields (user, nice, system, idle, iowait, irq, softirq, steal), rounded to 2 decimals as AWS prints them.
``context_switch_count`` is the ``ctxt`` delta over the period (a per-period counter).

The body comes from `usage_body_native` (the compiled helper, straight from the two raw samples) when the helper is
built and the samples are in the kernel's own layout; from its careful twin `usage_body_careful` otherwise. Both
make the body body.py defines.
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import sub
from typing import Any

from neuron_monitor.groups.base import SystemGroup
from neuron_monitor.groups.vcpu_usage import body as B
from neuron_monitor.groups.vcpu_usage.body import VcpuUsageBody
from neuron_monitor.host.procfs import ProcStat, parse_stat
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.native import NATIVE
from neuron_monitor.util.errors import GroupError

_OUT_FIELDS = B.CPU_MODES


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
        B.CPU_USER: (u * 20000 + total) // t2 / 100,
        B.CPU_NICE: (n * 20000 + total) // t2 / 100,
        B.CPU_SYSTEM: (s * 20000 + total) // t2 / 100,
        B.CPU_IDLE: (i * 20000 + total) // t2 / 100,
        B.CPU_IO_WAIT: (w * 20000 + total) // t2 / 100,
        B.CPU_IRQ: (q * 20000 + total) // t2 / 100,
        B.CPU_SOFT_IRQ: (sq * 20000 + total) // t2 / 100,
    }


def usage_percent(prev: tuple[int, ...], cur: tuple[int, ...]) -> dict[str, float]:
    """Shares of the time between two samples of one CPU's counters (see `shares_of`)."""
    return shares_of(tuple(map(sub, cur, prev)))


_SHARES_CACHE_MAX = 4096


class SharesMemo:
    """At high frequency a vCPU's delta is a handful of clock ticks, so the same deltas recur across vCPUs and
    periods (idle ones, saturated ones): each distinct delta's shares are computed once and the dict is shared
    (bodies are never mutated). All per-vCPU work is batched over the flat counters: one subtraction map, one
    grouping into 8-tuples, one cache lookup map; only new deltas cost Python-level arithmetic."""

    def __init__(self) -> None:
        self._shares: dict[tuple[int, ...], dict[str, float]] = {}
        self._names: tuple[tuple[int, ...], tuple[str, ...]] = ((), ())

    def per_cpu(self, prev: ProcStat, cur: ProcStat) -> dict[str, dict[str, float]]:
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


def usage_body_careful(prev: ProcStat, cur: ProcStat, memo: SharesMemo | None = None) -> VcpuUsageBody:
    """The body from two parsed samples of /proc/stat (``memo`` keeps the shares of recurring deltas)."""
    return VcpuUsageBody(
        average_usage=usage_percent(prev.total, cur.total),
        usage_data=(memo or SharesMemo()).per_cpu(prev, cur),
        context_switch_count=max(cur.ctxt - prev.ctxt, 0),
    )


def usage_body_native(prev: bytes, cur: bytes) -> dict[str, Any] | None:
    """`usage_body_careful` of ``parse_stat(prev)`` and ``parse_stat(cur)``, computed by the compiled helper from the
    raw samples: one pass over each, no Python object per counter. None when the helper is not built, or either
    sample is not in the kernel's own layout ("cpu" row, "cpuN" rows of one column count, "intr", "ctxt" digits),
    a value exceeds 2^44 ticks, or the vCPUs differ between the samples: the careful twin then decides."""
    if NATIVE is None:
        return None
    body: dict[str, Any] | None = NATIVE.vcpu_usage(prev, cur)
    return body


class VcpuUsage(SystemGroup):
    """Keeps the previous sample both raw (for `usage_body_native`) and parsed when the careful twin parsed it."""

    type_name = "vcpu_usage"

    def __init__(self, root: RootFS) -> None:
        super().__init__(root)
        self._file = root.open_kept("proc/stat")
        self._prev_raw: bytes | None = None  # the newest sample that parsed
        self._prev: ProcStat | None = None  # that sample parsed, None until the careful twin needs it
        self._memo = SharesMemo()

    def _read_raw(self) -> bytes:
        try:
            return self._file.read()
        except OSError as e:
            raise GroupError(f"open {self._file.path}: {e.strerror or e}") from None

    def _parse(self, raw: bytes) -> ProcStat:
        try:
            return parse_stat(raw)
        except ValueError as e:
            raise GroupError(f"parse {self._file.path}: {e}") from None

    def prime(self) -> None:
        try:
            raw = self._read_raw()
            self._prev, self._prev_raw = self._parse(raw), raw
        except GroupError:
            self._prev = self._prev_raw = None

    def collect(self) -> dict[str, Any]:
        raw = self._read_raw()
        prev_raw = self._prev_raw
        if prev_raw is not None:
            body = usage_body_native(prev_raw, raw)
            if body is not None:
                self._prev, self._prev_raw = None, raw
                return body
        cur = self._parse(raw)
        prev = self._prev
        if prev is None and prev_raw is not None:
            prev = parse_stat(prev_raw)  # parsed before (natively): parses again
        self._prev, self._prev_raw = cur, raw
        if prev is None:
            raise GroupError("no previous sample of /proc/stat yet; usage starts with the next period")
        return dict(usage_body_careful(prev, cur, self._memo))

    def close(self) -> None:
        self._file.close()


GROUP = VcpuUsage
