"""The exporter's own ``process_*``, ``python_info`` and ``python_gc_*`` metrics, read cheaply on every scrape.

The same families, names, help texts, labels and values as client_python's process, platform and GC collectors
(AWS's exporter serves those). ``/proc/self/stat`` is read with one ``pread`` on a descriptor kept open
(client_python opens, reads and closes it and ``/proc/self/limits`` on every scrape), the descriptor limit comes
from ``getrlimit`` (the soft limit, the figure ``/proc/self/limits`` shows), the open descriptors from the size of
a kept ``/proc/self/fd`` (Linux 6.2+; listed on older kernels), and ``python_info`` is built once. ``text``
formats only the values into a template of the lines (``exposition.SeriesTemplate``); ``families`` is its
careful twin. Where ``/proc`` cannot be read, the process families are left out, as client_python leaves them
out.
"""

from __future__ import annotations

import contextlib
import gc
import os
import platform
import resource
import weakref
from collections.abc import Iterator
from typing import Any

from prometheus_client.metrics_core import Metric

from neuron_monitor.exporters.prometheus.exposition import SeriesTemplates
from neuron_monitor.exporters.prometheus.families import COUNTER, GAUGE, Family

PROC = "/proc"


# (name, kind, help) of the process families, in the order their values are read
_PROCESS = (
    ("process_virtual_memory_bytes", GAUGE, "Virtual memory size in bytes."),
    ("process_resident_memory_bytes", GAUGE, "Resident memory size in bytes."),
    ("process_start_time_seconds", GAUGE, "Start time of the process since unix epoch in seconds."),
    ("process_cpu_seconds", COUNTER, "Total user and system CPU time spent in seconds."),
    ("process_open_fds", GAUGE, "Number of open file descriptors."),
    ("process_max_fds", GAUGE, "Maximum number of open file descriptors."),
)
# (name, help, key in gc.get_stats()) of the GC families
_GC = (
    ("python_gc_objects_collected", "Objects collected during gc", "collected"),
    ("python_gc_objects_uncollectable", "Uncollectable objects found during GC", "uncollectable"),
    ("python_gc_collections", "Number of times this generation was collected", "collections"),
)


class ProcessMetrics:
    """``text()`` (or ``families()``) per scrape; ``collect()`` offers them through client_python's collector
    interface."""

    def __init__(self, proc: str = PROC) -> None:
        self._proc = proc
        self._ticks = float(os.sysconf("SC_CLK_TCK"))
        self._pagesize = float(resource.getpagesize())
        self._stat_fd = -1
        self._fd_dir = -1
        self._btime = 0.0
        try:
            self._btime = _boot_time(proc)
            self._stat_fd = os.open(f"{proc}/self/stat", os.O_RDONLY | os.O_CLOEXEC)
            self._fd_dir = os.open(f"{proc}/self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except (OSError, ValueError):
            pass
        weakref.finalize(self, _close_all, self._stat_fd, self._fd_dir)  # the kept descriptors go with us
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
        self._templates = SeriesTemplates()

    def families(self) -> list[Family]:
        """The families of this moment (the careful twin of ``text``)."""
        return self._families(self._readings(), gc.get_stats())

    def text(self, openmetrics: bool) -> str:
        """The families of this moment as exposition text: what ``families()`` renders to, from a template of
        their lines (only the values are formatted per scrape)."""
        readings, stats = self._readings(), gc.get_stats()
        values = [*readings, 1.0, *(float(s[key]) for _, _, key in _GC for s in stats)]
        shape = (len(readings), len(stats), openmetrics)
        return self._templates.render(shape, values, lambda: self._families(readings, stats), openmetrics)

    def collect(self) -> Iterator[Metric]:
        for family in self.families():
            yield family.to_metric()

    def _families(self, readings: list[float], stats: list[dict[str, Any]]) -> list[Family]:
        out = [
            Family(name, kind, text, (), {(): value})
            for (name, kind, text), value in zip(_PROCESS, readings, strict=False)
        ]  # readings may stop short
        out.append(self._python_info)
        for name, text, key in _GC:
            out.append(
                Family(name, COUNTER, text, ("generation",), {(str(g),): float(s[key]) for g, s in enumerate(stats)})
            )
        return out

    def _readings(self) -> list[float]:
        """The values of ``_PROCESS`` that could be read, in order: all six, the four from ``/proc/self/stat``
        when the descriptors cannot be listed, or none where ``/proc`` cannot be read (client_python then leaves
        the process families out too)."""
        if not self._btime or self._stat_fd < 0:
            return []
        try:
            parts = os.pread(self._stat_fd, 4096, 0).split(b")")[-1].split()
            ticks = self._ticks
            out = [
                float(parts[20]),
                float(parts[21]) * self._pagesize,
                float(parts[19]) / ticks + self._btime,
                float(parts[11]) / ticks + float(parts[12]) / ticks,
            ]
        except (OSError, IndexError, ValueError):
            return []
        try:
            open_fds = self._open_fds()
        except OSError:
            return out
        out += [float(open_fds), float(resource.getrlimit(resource.RLIMIT_NOFILE)[0])]
        return out

    def _open_fds(self) -> int:
        """Open descriptors: since Linux 6.2 the size of ``/proc/self/fd`` (on the kept descriptor, which is one
        of them, so never 0); on older kernels (size 0) the directory's entries are counted, as client_python
        does (its count includes the descriptor it lists with, as ours includes the kept one)."""
        if self._fd_dir >= 0:
            size = os.fstat(self._fd_dir).st_size
            if size > 0:
                return size
        return len(os.listdir(f"{self._proc}/self/fd"))


def _close_all(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


def _boot_time(proc: str) -> float:
    with open(f"{proc}/stat", "rb") as stat:
        for line in stat:
            if line.startswith(b"btime "):
                return float(line.split()[1])
    return 0.0
