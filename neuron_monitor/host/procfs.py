"""Kernel parsing for procfs, separate from metric shaping (as node_exporter's procfs package).

- `parse_stat(data)`: /proc/stat -> per-CPU jiffy counters (aggregate "cpu" line and each "cpuN") and ``ctxt``.
- `parse_meminfo(data)`: /proc/meminfo -> {field: bytes}.
- `parse_pid_stat(data)`: /proc/PID/stat -> utime, stime, starttime (clock ticks).
- `parse_uptime(data)`: /proc/uptime -> seconds since boot.
All take bytes as read from the file and raise ValueError on malformed input.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

# /proc/stat cpu columns in order: user nice system idle iowait irq softirq steal guest guest_nice
CPU_FIELDS: tuple[str, ...] = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class ProcStat:
    total: tuple[int, ...]  # the aggregate "cpu" line, CPU_FIELDS order
    cpus: dict[int, tuple[int, ...]]  # "cpuN" -> counters, CPU_FIELDS order
    ctxt: int


def _cpu_counters(parts: list[bytes]) -> tuple[int, ...]:
    vals = tuple(map(int, parts[1:9]))
    if len(vals) < 8:
        if len(vals) < 4:
            raise ValueError(f"cpu line has {len(vals)} columns, expected at least 4")
        vals += (0,) * (8 - len(vals))
    return vals


@functools.lru_cache(maxsize=8)
def _cpu_mask(columns: int, rows: int) -> tuple[bool, ...]:
    """Which tokens of a cpu block to convert: the 8 time columns of each row (not its name, not guest time)."""
    row = (False,) + (True,) * 8 + (False,) * (columns - 9)
    return row * rows


def _parse_cpu_block_fast(block: bytes) -> tuple[tuple[int, ...], dict[int, tuple[int, ...]]] | None:
    """All cpu lines with the same column count (every kernel since 2.6.33): one split, one int map."""
    toks = block.split()
    if not toks or toks[0] != b"cpu":
        return None
    try:
        k = toks.index(b"cpu0")
    except ValueError:
        return None
    if k < 9 or len(toks) % k:
        return None
    names = toks[::k]
    if not all(n.startswith(b"cpu") for n in names):
        return None
    nums = list(map(int, itertools.compress(toks, _cpu_mask(k, len(names)))))
    total = tuple(nums[0:8])
    cpus = {int(names[j][3:]): tuple(nums[j * 8 : j * 8 + 8]) for j in range(1, len(names))}
    return total, cpus


def parse_stat(data: bytes) -> ProcStat:
    # The cpu lines come first; ctxt follows the (very long) intr line. Parse only what is needed.
    end = data.find(b"\nintr ")
    block = data if end < 0 else data[:end]
    fast = _parse_cpu_block_fast(block[: block.find(b"\n", block.rfind(b"\ncpu") + 1)]) if end >= 0 else None
    total: tuple[int, ...] | None
    if fast is not None:
        total, cpus = fast
    else:
        total, cpus = None, {}
        for line in block.split(b"\n"):
            if not line.startswith(b"cpu"):
                continue
            parts = line.split()
            if parts[0] == b"cpu":
                total = _cpu_counters(parts)
            else:
                cpus[int(parts[0][3:])] = _cpu_counters(parts)
    at = data.find(b"\nctxt ")
    if total is None:
        raise ValueError("no aggregate cpu line in /proc/stat")
    if at < 0:
        raise ValueError("no ctxt line in /proc/stat")
    nl = data.find(b"\n", at + 6)
    ctxt = int(data[at + 6 : nl if nl >= 0 else len(data)])
    return ProcStat(total=total, cpus=cpus, ctxt=ctxt)


def parse_meminfo(data: bytes) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in data.splitlines():
        key, sep, rest = line.partition(b":")
        if not sep:
            continue
        fields = rest.split()
        if not fields:
            continue
        value = int(fields[0])
        if len(fields) > 1 and fields[1] == b"kB":
            value *= 1024
        out[key.decode()] = value
    if "MemTotal" not in out:
        raise ValueError("no MemTotal in /proc/meminfo")
    return out


@dataclass(frozen=True)
class PidStat:
    utime: int
    stime: int
    starttime: int


def parse_pid_stat(data: bytes) -> PidStat:
    # comm (field 2) may hold spaces and parentheses: split after the last ')'
    end = data.rfind(b")")
    if end < 0:
        raise ValueError("malformed /proc/PID/stat")
    rest = data[end + 2 :].split()
    # rest[0] is field 3 (state); utime=14, stime=15, starttime=22
    if len(rest) < 20:
        raise ValueError("truncated /proc/PID/stat")
    return PidStat(utime=int(rest[11]), stime=int(rest[12]), starttime=int(rest[19]))


def parse_uptime(data: bytes) -> float:
    return float(data.split()[0])
