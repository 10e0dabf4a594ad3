"""Kernel parsing for procfs, separate from metric shaping (as node_exporter's procfs package).

- `parse_stat(data)`: /proc/stat -> per-CPU jiffy counters (aggregate "cpu" line and each "cpuN") and ``ctxt``.
- `parse_meminfo(data)`: /proc/meminfo -> {field: bytes}.
- `parse_pid_stat(data)`: /proc/PID/stat -> utime, stime, starttime (clock ticks).
- `parse_uptime(data)`: /proc/uptime -> seconds since boot.
All take bytes as read from the file and raise ValueError on malformed input.
"""

from __future__ import annotations

from dataclasses import dataclass

# /proc/stat cpu columns in order: user nice system idle iowait irq softirq steal guest guest_nice
CPU_FIELDS: tuple[str, ...] = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class ProcStat:
    total: tuple[int, ...]  # the aggregate "cpu" line, CPU_FIELDS order
    cpus: dict[int, tuple[int, ...]]  # "cpuN" -> counters, CPU_FIELDS order
    ctxt: int


def _cpu_counters(parts: list[bytes]) -> tuple[int, ...]:
    vals = [int(p) for p in parts[1:9]]
    if len(vals) < 4:
        raise ValueError(f"cpu line has {len(vals)} columns, expected at least 4")
    vals.extend([0] * (8 - len(vals)))
    return tuple(vals)


def parse_stat(data: bytes) -> ProcStat:
    total: tuple[int, ...] | None = None
    cpus: dict[int, tuple[int, ...]] = {}
    ctxt: int | None = None
    for line in data.splitlines():
        if line.startswith(b"cpu"):
            parts = line.split()
            name = parts[0]
            if name == b"cpu":
                total = _cpu_counters(parts)
            else:
                cpus[int(name[3:])] = _cpu_counters(parts)
        elif line.startswith(b"ctxt "):
            ctxt = int(line[5:])
            break  # ctxt follows every cpu line; skip the long intr/softirq lines after it
    if total is None:
        raise ValueError("no aggregate cpu line in /proc/stat")
    if ctxt is None:
        raise ValueError("no ctxt line in /proc/stat")
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
