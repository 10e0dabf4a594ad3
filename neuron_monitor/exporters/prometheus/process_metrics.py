"""The exporter's own ``process_*``, ``python_info`` and ``python_gc_*`` metrics, read cheaply on every scrape.

The same families, names, help texts, labels and values as client_python's process, platform and GC collectors
(AWS's exporter serves those), as ``Family`` objects so the renderer keeps their lines: ``/proc/self/stat`` is read
with one ``pread`` on a descriptor kept open (client_python opens, reads and closes it and ``/proc/self/limits`` on
every scrape), the descriptor limit comes from ``getrlimit`` (the soft limit, the figure ``/proc/self/limits``
shows), and ``python_info`` is built once. Where ``/proc`` cannot be read, the process families are left out, as
client_python leaves them out.
"""

from __future__ import annotations

import gc
import os
import platform
import resource
from collections.abc import Iterator

from prometheus_client.metrics_core import Metric

from neuron_monitor.exporters.prometheus.families import COUNTER, GAUGE, Family

PROC = "/proc"


class ProcessMetrics:
    """``families()`` per scrape; ``collect()`` offers them through client_python's collector interface."""

    def __init__(self, proc: str = PROC) -> None:
        self._proc = proc
        self._ticks = float(os.sysconf("SC_CLK_TCK"))
        self._pagesize = float(resource.getpagesize())
        self._stat_fd = -1
        self._btime = 0.0
        try:
            self._btime = _boot_time(proc)
            self._stat_fd = os.open(f"{proc}/self/stat", os.O_RDONLY | os.O_CLOEXEC)
        except (OSError, ValueError):
            pass
        major, minor, patchlevel = platform.python_version_tuple()
        info = {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "major": major,
            "minor": minor,
            "patchlevel": patchlevel,
        }
        self._python_info = Family(
            "python_info", GAUGE, "Python platform information", tuple(info), {tuple(info.values()): 1.0}
        )

    def families(self) -> list[Family]:
        out = self._process() if self._btime and self._stat_fd >= 0 else []
        out.append(self._python_info)
        out += _gc_families()
        return out

    def collect(self) -> Iterator[Metric]:
        for family in self.families():
            yield family.to_metric()

    def _process(self) -> list[Family]:
        out: list[Family] = []
        try:
            parts = os.pread(self._stat_fd, 4096, 0).split(b")")[-1].split()
            ticks = self._ticks
            out += [
                _one("process_virtual_memory_bytes", GAUGE, "Virtual memory size in bytes.", float(parts[20])),
                _one(
                    "process_resident_memory_bytes",
                    GAUGE,
                    "Resident memory size in bytes.",
                    float(parts[21]) * self._pagesize,
                ),
                _one(
                    "process_start_time_seconds",
                    GAUGE,
                    "Start time of the process since unix epoch in seconds.",
                    float(parts[19]) / ticks + self._btime,
                ),
                _one(
                    "process_cpu_seconds",
                    COUNTER,
                    "Total user and system CPU time spent in seconds.",
                    float(parts[11]) / ticks + float(parts[12]) / ticks,
                ),
            ]
        except (OSError, IndexError, ValueError):
            return out
        try:
            open_fds = len(os.listdir(f"{self._proc}/self/fd"))
        except OSError:
            return out
        max_fds = float(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        out.append(_one("process_open_fds", GAUGE, "Number of open file descriptors.", float(open_fds)))
        out.append(_one("process_max_fds", GAUGE, "Maximum number of open file descriptors.", max_fds))
        return out


def _one(name: str, kind: str, help_text: str, value: float) -> Family:
    return Family(name, kind, help_text, (), {(): value})


def _gc_families() -> list[Family]:
    stats = gc.get_stats()
    names = ("generation",)

    def family(name: str, help_text: str, key: str) -> Family:
        return Family(name, COUNTER, help_text, names, {(str(g),): float(s[key]) for g, s in enumerate(stats)})

    return [
        family("python_gc_objects_collected", "Objects collected during gc", "collected"),
        family("python_gc_objects_uncollectable", "Uncollectable objects found during GC", "uncollectable"),
        family("python_gc_collections", "Number of times this generation was collected", "collections"),
    ]


def _boot_time(proc: str) -> float:
    with open(f"{proc}/stat", "rb") as stat:
        for line in stat:
            if line.startswith(b"btime "):
                return float(line.split()[1])
    return 0.0
