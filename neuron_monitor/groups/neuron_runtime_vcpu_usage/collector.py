"""Runtime group ``neuron_runtime_vcpu_usage``: an application's user/system CPU share over the period.

Reads ``<root>/proc/<pid>/stat`` (utime, stime) through a descriptor kept per pid, which also keeps a recycled
pid from being mistaken for the same process. Percent of one vCPU (as `top`): a process using two vCPUs fully
shows 200. On first sight of a pid the baseline is the process start (starttime against the uptime of the procfs
that pid lives in, found by resolving ``<root>/proc/<pid>``: the host's ``/proc/uptime`` when it links there, as the
simulator's do, else ``<root>/proc/uptime``; either read as every file is, regular only, non-blocking and capped),
so the first report covers the process's life so far and says so in its ``period``; an uptime that cannot be read
makes that first body zeros with the reason in its ``error``. An application that exited
gets AWS's error text ("open /proc/PID/stat: no such file or directory") and zeros, never a crash.

Each period's body comes from `usage_native` (the compiled helper, from the raw sample) when the helper is built
and the sample is in the kernel's layout, from its careful twin `usage_careful` otherwise.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from neuron_monitor.groups.base import RuntimeGroup
from neuron_monitor.groups.neuron_runtime_vcpu_usage.body import CpuShares, RuntimeVcpuUsageBody
from neuron_monitor.host.procfs import parse_pid_stat, parse_uptime
from neuron_monitor.host.rootfs import KeptFile, RootFS
from neuron_monitor.native import NATIVE
from neuron_monitor.neuron.app import App

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_HOST = RootFS("/")  # the host's own procfs, where a root's proc/<pid> may link (the simulator's do)


@dataclass
class _Baseline:
    file: KeptFile
    utime: int
    stime: int
    t: float


def _zero(error: str, period: float | None = None) -> RuntimeVcpuUsageBody:
    body = RuntimeVcpuUsageBody(vcpu_usage=CpuShares(user=0.0, system=0.0), error=error)
    if period is not None:
        body["period"] = period
    return body


class _Shares:
    """The rounded numbers of the bodies of one interval: its ``period`` and the share of each tick count. The
    runtimes of one collection are read at one time, so they share the interval, and at 0.1 s their tick counts
    are a handful of small numbers: each is computed (and rounded) once per interval, not once per runtime."""

    __slots__ = ("dt", "period", "shares")

    def __init__(self) -> None:
        self.dt = math.nan
        self.period = 0.0
        self.shares: dict[int, float] = {}

    def of(self, dt: float) -> dict[int, float]:
        """The tick count -> share memo of an interval of ``dt`` seconds (``period`` set to its rounding)."""
        if dt != self.dt:
            self.dt, self.period, self.shares = dt, round(dt, 9), {}
        elif len(self.shares) > _SHARES_MAX:
            self.shares.clear()
        return self.shares


_SHARES_MAX = 256
_INTERVAL = _Shares()


def usage_careful(data: bytes, utime: int, stime: int, dt: float) -> tuple[RuntimeVcpuUsageBody, int, int]:
    """The body of a period of ``dt`` seconds (> 0) from a raw /proc/PID/stat sample and the utime and stime of the
    previous one, and the sample's utime and stime. ValueError when the sample does not parse."""
    st = parse_pid_stat(data)
    shares = _INTERVAL.of(dt)
    user_ticks, system_ticks = max(st.utime - utime, 0), max(st.stime - stime, 0)
    user = shares.get(user_ticks)
    if user is None:
        user = shares[user_ticks] = round(user_ticks / CLOCK_TICKS / dt * 100.0, 2)
    system = shares.get(system_ticks)
    if system is None:
        system = shares[system_ticks] = round(system_ticks / CLOCK_TICKS / dt * 100.0, 2)
    body = RuntimeVcpuUsageBody(period=_INTERVAL.period, vcpu_usage=CpuShares(user=user, system=system))
    return body, st.utime, st.stime


def usage_native(data: bytes, utime: int, stime: int, dt: float) -> tuple[RuntimeVcpuUsageBody, int, int] | None:
    """`usage_careful` by the compiled helper (one pass over the sample; round() as Python's, from the correctly
    rounded decimal string). None when the helper is not built, or the sample is not in the kernel's layout
    (single spaces after the comm's last ')', the times plain digits up to 2^53): the careful twin then decides."""
    if NATIVE is None:
        return None
    # the helper builds body.py's keys itself (tests/groups/test_group_bodies.py checks them)
    return cast("tuple[RuntimeVcpuUsageBody, int, int] | None", NATIVE.pid_usage(data, utime, stime, dt, CLOCK_TICKS))


class NeuronRuntimeVcpuUsage(RuntimeGroup):
    type_name = "neuron_runtime_vcpu_usage"

    def __init__(self, root: RootFS) -> None:
        super().__init__(root)
        self._base: dict[int, _Baseline] = {}

    def _first_sight(self, pid: int, now: float) -> tuple[_Baseline, RuntimeVcpuUsageBody]:
        kept = self.root.open_kept(f"proc/{pid}/stat")
        st = parse_pid_stat(kept.read())
        base = _Baseline(kept, st.utime, st.stime, now)
        # starttime counts from the boot of the kernel the process runs on: use that procfs's uptime
        linked_to_host = os.path.dirname(os.path.realpath(self.root.where(f"proc/{pid}"))) == "/proc"
        procfs = _HOST if linked_to_host else self.root
        try:
            lifetime = parse_uptime(procfs.read_bytes("proc/uptime")) - st.starttime / CLOCK_TICKS
        except (OSError, ValueError, IndexError) as e:
            where = procfs.where("proc/uptime")
            return base, _zero(f"read {where}: {(getattr(e, 'strerror', None) or str(e)).lower()}"[:300], 0.0)
        if lifetime <= 0.05:
            return base, _zero("", 0.0)
        return base, RuntimeVcpuUsageBody(
            period=round(lifetime, 9),
            vcpu_usage=CpuShares(
                user=round(st.utime / CLOCK_TICKS / lifetime * 100.0, 2),
                system=round(st.stime / CLOCK_TICKS / lifetime * 100.0, 2),
            ),
        )

    def collect(self, apps: Sequence[App], gone: Sequence[App]) -> dict[int, dict[str, Any]]:
        now = time.monotonic()
        out: dict[int, RuntimeVcpuUsageBody] = {}
        for app in apps:
            pid = app.pid
            base = self._base.get(pid)
            try:
                if base is None:
                    self._base[pid], out[pid] = self._first_sight(pid, now)
                    continue
                data = base.file.read()
                dt = now - base.t
                if dt <= 0:
                    parse_pid_stat(data)  # a sample that does not parse is an error even then
                    out[pid] = _zero("", 0.0)
                    continue
                got = usage_native(data, base.utime, base.stime, dt)
                if got is None:
                    got = usage_careful(data, base.utime, base.stime, dt)
            except (OSError, ValueError) as e:
                out[pid] = _zero(_go_style_error(self.root, pid, e))
                self._forget(pid)
                continue
            out[pid], base.utime, base.stime = got
            base.t = now
        for app in gone:
            if app.pid in self._base:
                out[app.pid] = _zero(f"open /proc/{app.pid}/stat: no such file or directory")
            self._forget(app.pid)
        return cast(dict[int, dict[str, Any]], out)  # the same objects: a TypedDict is a dict

    def _forget(self, pid: int) -> None:
        base = self._base.pop(pid, None)
        if base is not None:
            base.file.close()

    def close(self) -> None:
        for pid in list(self._base):
            self._forget(pid)


def _go_style_error(root: RootFS, pid: int, e: Exception) -> str:
    if isinstance(e, FileNotFoundError) or (isinstance(e, OSError) and e.errno == 3):  # ESRCH: process gone
        return f"open /proc/{pid}/stat: no such file or directory"
    if isinstance(e, OSError):
        return f"open /proc/{pid}/stat: {(e.strerror or str(e)).lower()}"
    return f"parse /proc/{pid}/stat: {e}"


GROUP = NeuronRuntimeVcpuUsage
