"""The exporter's own ``process_*``, ``python_info`` and ``python_gc_*`` metrics, read cheaply, at most once a second.

The same families, names, help texts, labels and values as client_python's process, platform and GC collectors
(AWS's exporter serves those). ``/proc/self/stat`` is read with one ``pread`` on a descriptor kept open
(client_python opens, reads and closes it and ``/proc/self/limits`` on every scrape), the descriptor limit comes
from ``getrlimit`` (the soft limit, the figure ``/proc/self/limits`` shows), the open descriptors from the size of
a kept ``/proc/self/fd`` (Linux 6.2+; listed on older kernels), and ``python_info`` is built once. Scrapes less
than ``READ_EVERY`` (1 s) apart share one reading (``text``): at Prometheus's usual intervals every scrape reads. The
families are one table (``ROWS``: name, kind, help, how to read it); ``text`` formats only the values into a
template of the lines (``exposition.MetricTable``), ``families`` is its careful twin. Where ``/proc`` cannot
be read, the process families are left out, as client_python leaves them out.
"""

from __future__ import annotations

import contextlib
import gc
import os
import platform
import resource
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from prometheus_client.metrics_core import Metric

from neuron_monitor.exporters.prometheus.exposition import MetricTable, Reading, Row
from neuron_monitor.exporters.prometheus.families import COUNTER, GAUGE, Family

PROC = "/proc"
# Seconds one reading of the process serves scrapes in ``text``: scrapes less than this apart share it, so at 10
# scrapes a second the figures are at most this old (node_exporter and client_python read on every scrape; at
# Prometheus's usual 15-60 s interval every scrape reads here too). ``families()`` always reads.
READ_EVERY = 1.0


class ProcessReading(NamedTuple):
    """What one scrape reads of the process: each ``/proc`` figure, None where it could not be read."""

    virtual_memory: float | None = None
    resident_memory: float | None = None
    start_time: float | None = None
    cpu_seconds: float | None = None
    open_fds: float | None = None
    max_fds: float | None = None
    gc_stats: Sequence[dict[str, Any]] = ()


_PYTHON_MAJOR, _PYTHON_MINOR, _PYTHON_PATCHLEVEL = platform.python_version_tuple()
_PYTHON_INFO = {
    "version": platform.python_version(),
    "implementation": platform.python_implementation(),
    "major": _PYTHON_MAJOR,
    "minor": _PYTHON_MINOR,
    "patchlevel": _PYTHON_PATCHLEVEL,
}
_PYTHON_INFO_SAMPLES = {tuple(_PYTHON_INFO.values()): 1.0}


def _gc(key: str) -> Callable[[ProcessReading], Reading]:
    """A GC family's samples: ``key`` of ``gc.get_stats()`` per generation."""
    return lambda r: {(str(g),): float(s[key]) for g, s in enumerate(r.gc_stats)}


# The families, in client_python's order: one row each (name, kind, help, how to read it, label names).
ROWS: tuple[Row[ProcessReading], ...] = (
    Row("process_virtual_memory_bytes", GAUGE, "Virtual memory size in bytes.", lambda r: r.virtual_memory),
    Row("process_resident_memory_bytes", GAUGE, "Resident memory size in bytes.", lambda r: r.resident_memory),
    Row(
        "process_start_time_seconds",
        GAUGE,
        "Start time of the process since unix epoch in seconds.",
        lambda r: r.start_time,
    ),
    Row("process_cpu_seconds", COUNTER, "Total user and system CPU time spent in seconds.", lambda r: r.cpu_seconds),
    Row("process_open_fds", GAUGE, "Number of open file descriptors.", lambda r: r.open_fds),
    Row("process_max_fds", GAUGE, "Maximum number of open file descriptors.", lambda r: r.max_fds),
    Row("python_info", GAUGE, "Python platform information", lambda r: _PYTHON_INFO_SAMPLES, tuple(_PYTHON_INFO)),
    Row("python_gc_objects_collected", COUNTER, "Objects collected during gc", _gc("collected"), ("generation",)),
    Row(
        "python_gc_objects_uncollectable",
        COUNTER,
        "Uncollectable objects found during GC",
        _gc("uncollectable"),
        ("generation",),
    ),
    Row(
        "python_gc_collections",
        COUNTER,
        "Number of times this generation was collected",
        _gc("collections"),
        ("generation",),
    ),
)


class ProcessMetrics:
    """``text()`` (or ``families()``) per scrape; ``collect()`` offers them through client_python's collector
    interface."""

    def __init__(self, proc: str = PROC, read_every: float = READ_EVERY) -> None:
        self._proc = proc
        self.read_every = read_every
        self._kept: tuple[float, ProcessReading] | None = None  # (monotonic time, the reading ``text`` serves)
        self._last_text: tuple[ProcessReading, bool, str] | None = None  # the text of the kept reading
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
        self.table = MetricTable(ROWS)

    def families(self) -> list[Family]:
        """The families of this moment (the careful twin of ``text``)."""
        return self.table.families(self._readings())

    def text(self, openmetrics: bool) -> str:
        """The families as exposition text: what ``families()`` renders to, from a template of their lines (only
        the values are formatted), read at most ``read_every`` seconds ago. While the reading is kept the same
        text object is given again (the table's last text), which lets a scrape reuse its whole tail."""
        now = time.monotonic()
        kept = self._kept
        if kept is None or not 0.0 <= now - kept[0] < self.read_every:
            kept = self._kept = (now, self._readings())
        last = self._last_text
        if last is not None and last[0] is kept[1] and last[1] == openmetrics:
            return last[2]
        text = self.table.text(kept[1], openmetrics)
        self._last_text = (kept[1], openmetrics, text)
        return text

    def collect(self) -> Iterator[Metric]:
        for family in self.families():
            yield family.to_metric()

    def _readings(self) -> ProcessReading:
        """This moment's figures: all six process figures, the four from ``/proc/self/stat`` when the
        descriptors cannot be listed, or none where ``/proc`` cannot be read (client_python then leaves the
        process families out too); the GC's figures always."""
        gc_stats = gc.get_stats()
        if not self._btime or self._stat_fd < 0:
            return ProcessReading(gc_stats=gc_stats)
        try:
            parts = os.pread(self._stat_fd, 4096, 0).split(b")")[-1].split()
            ticks = self._ticks
            stat = (
                float(parts[20]),
                float(parts[21]) * self._pagesize,
                float(parts[19]) / ticks + self._btime,
                float(parts[11]) / ticks + float(parts[12]) / ticks,
            )
        except (OSError, IndexError, ValueError):
            return ProcessReading(gc_stats=gc_stats)
        try:
            open_fds = self._open_fds()
        except OSError:
            return ProcessReading(*stat, gc_stats=gc_stats)
        limit = float(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        return ProcessReading(*stat, float(open_fds), limit, gc_stats)

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
