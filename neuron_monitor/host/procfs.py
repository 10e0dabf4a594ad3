"""Kernel parsing for procfs, separate from metric shaping (as node_exporter's procfs package).

- `parse_stat(data)`: /proc/stat -> jiffy counters (aggregate "cpu" line, each "cpuN" flat) and ``ctxt``.
- `parse_meminfo(data, names=None)`: /proc/meminfo -> {field: bytes} (only the named fields, given ``names``).
- `parse_pid_stat(data)`: /proc/PID/stat -> utime, stime, starttime (clock ticks).
- `parse_uptime(data)`: /proc/uptime -> seconds since boot.
All take bytes as read from the file and raise ValueError on malformed input.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import NamedTuple

import orjson

# /proc/stat cpu columns in order: user nice system idle iowait irq softirq steal guest guest_nice
CPU_FIELDS: tuple[str, ...] = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class ProcStat:
    """/proc/stat's CPU time counters (clock ticks) and context switches.

    ``counters`` is flat: the 8 CPU_FIELDS of ``cpu_ids[0]``, then of ``cpu_ids[1]``, ... (file order), so that the
    deltas of two samples of the same CPUs are one ``map(sub, ...)`` instead of one tuple per vCPU."""

    total: tuple[int, ...]  # the aggregate "cpu" line, CPU_FIELDS order
    cpu_ids: tuple[int, ...]  # N of each "cpuN" line, file order
    counters: list[int]  # CPU_FIELDS of each cpu_ids entry, flat
    ctxt: int

    @property
    def cpus(self) -> dict[int, tuple[int, ...]]:
        """{N: counters of cpuN} (for callers that want one vCPU at a time)."""
        c = self.counters
        return {cpu: tuple(c[8 * j : 8 * j + 8]) for j, cpu in enumerate(self.cpu_ids)}


def _cpu_counters(parts: list[bytes]) -> tuple[int, ...]:
    vals = tuple(map(int, parts[1:9]))
    if len(vals) < 8:
        if len(vals) < 4:
            raise ValueError(f"cpu line has {len(vals)} columns, expected at least 4")
        vals += (0,) * (8 - len(vals))
    return vals


_COMMAS = bytes.maketrans(b" \n", b",,")


@functools.lru_cache(maxsize=8)
def _time_columns(columns: int, cpus: int) -> tuple[bool, ...]:
    """Which numbers of a cpu block are the 8 time columns: every column of the aggregate row but guest time, then
    for each cpuN row its N (False), its time columns, not its guest columns."""
    guest = (False,) * (columns - 8)
    return (True,) * 8 + guest + ((False,) + (True,) * 8 + guest) * cpus


def _parse_cpu_block_fast(block: bytes) -> tuple[tuple[int, ...], tuple[int, ...], list[int]] | None:
    """The kernel's own layout ("cpu  a b ...", then "cpuN a b ..." rows, single spaces, the same column count on
    every row, at least 8 columns; every kernel since 2.6.24): the block becomes one JSON array, parsed in C.
    None when the block is laid out any other way (the caller then parses it line by line)."""
    first = block[: block.find(b"\n")].split()
    if not first or first[0] != b"cpu" or len(first) < 9 or b"," in block:  # commas: only from the translation
        return None
    columns = len(first) - 1
    # One pass: spaces and newlines become commas and the "cpu" of each row goes, when those are the only c, p
    # and u in the block (checked by the lengths: then it is what replacing "\ncpu" and " " by "," gives).
    rows = block.count(b"\n")
    if block.count(b"\ncpu") != rows:
        return None
    body = block[3:].translate(_COMMAS, b"cpu")
    if len(body) != len(block) - 3 - 3 * rows:
        return None
    body = body.lstrip(b",")
    if body.translate(None, b"0123456789,"):  # anything but digits and commas: not the kernel's layout
        return None
    try:
        nums = orjson.loads(b"[" + body + b"]")  # digits and commas: whole numbers (the kernel prints u64)
    except orjson.JSONDecodeError:
        return None
    cpus, extra = divmod(len(nums) - columns, columns + 1)
    if extra:
        return None
    flat = list(itertools.compress(nums, _time_columns(columns, cpus)))
    return tuple(flat[:8]), tuple(nums[columns :: columns + 1]), flat[8:]


def _parse_cpu_lines(block: bytes) -> tuple[tuple[int, ...], tuple[int, ...], list[int]]:
    total: tuple[int, ...] | None = None
    ids: list[int] = []
    counters: list[int] = []
    for line in block.split(b"\n"):
        if not line.startswith(b"cpu"):
            continue
        parts = line.split()
        if parts[0] == b"cpu":
            total = _cpu_counters(parts)
        else:
            ids.append(int(parts[0][3:]))
            counters += _cpu_counters(parts)
    if total is None:
        raise ValueError("no aggregate cpu line in /proc/stat")
    return total, tuple(ids), counters


def parse_stat(data: bytes) -> ProcStat:
    # The cpu lines come first and the (very long) intr line follows them; ctxt comes later. Parse only what is needed.
    end = data.find(b"\nintr ")
    block = data if end < 0 else data[:end]
    parsed = _parse_cpu_block_fast(block) if end >= 0 else None
    total, ids, counters = parsed if parsed is not None else _parse_cpu_lines(block)
    at = data.find(b"\nctxt ")
    if at < 0:
        raise ValueError("no ctxt line in /proc/stat")
    nl = data.find(b"\n", at + 6)
    ctxt = int(data[at + 6 : nl if nl >= 0 else len(data)])
    return ProcStat(total=total, cpu_ids=ids, counters=counters, ctxt=ctxt)


def parse_meminfo(data: bytes, names: tuple[str, ...] | None = None) -> dict[str, int]:
    """/proc/meminfo's fields in bytes (where a field occurs twice, the last line with a value wins); with
    ``names`` only those fields: other lines are then not parsed, so a malformed line elsewhere does not matter,
    and skipping them halves the cost on a kernel's ~55 lines (what the memory_info group reads). ValueError when a
    parsed value is not a number, or without MemTotal."""
    wanted = None if names is None else {name.encode(): name for name in names}
    out: dict[str, int] = {}
    for line in data.splitlines():
        key, sep, rest = line.partition(b":")
        if not sep:
            continue
        if wanted is None:
            name = key.decode()
        else:
            picked = wanted.get(key)
            if picked is None:
                continue
            name = picked
        fields = rest.split()
        if not fields:
            continue
        value = int(fields[0])
        out[name] = value * 1024 if len(fields) > 1 and fields[1] == b"kB" else value
    if "MemTotal" not in out:
        raise ValueError("no MemTotal in /proc/meminfo")
    return out


class PidStat(NamedTuple):  # half the cost of a frozen dataclass to build (16 times a report on a trn2)
    utime: int
    stime: int
    starttime: int


def parse_pid_stat(data: bytes) -> PidStat:
    # comm (field 2) may hold spaces and parentheses: split after the last ')'
    end = data.rfind(b")")
    if end < 0:
        raise ValueError("malformed /proc/PID/stat")
    rest = data[end + 2 :].split(None, 20)  # up to starttime; the thirty fields after it stay one piece
    # rest[0] is field 3 (state); utime=14, stime=15, starttime=22
    if len(rest) < 20:
        raise ValueError("truncated /proc/PID/stat")
    return PidStat(int(rest[11]), int(rest[12]), int(rest[19]))


def parse_uptime(data: bytes) -> float:
    return float(data.split()[0])
