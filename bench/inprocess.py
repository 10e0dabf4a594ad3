"""Measuring inside this process, for the benchmarks that time code in process rather than a daemon from the OS
(bench/daemon_run.py does that): CPU time of one call on this thread's clock, a floor loop of preads over kept
descriptors, and a simulated host's files (device trees, host files) in a temporary folder."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from neuron_monitor.sim.shapes import Shape, get_shape
from neuron_monitor.sim.tree import DeviceTree, write_host_files

T = TypeVar("T")

DRIVER_VERSION = "2.30.2.0"


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """``fn()``'s result and the milliseconds of this thread's CPU it took."""
    t = time.thread_time()
    out = fn()
    return out, (time.thread_time() - t) * 1000


def cpu_ms(fn: Callable[[], object], settle: float = 0.0) -> float:
    """Milliseconds of this thread's CPU one call of ``fn`` takes, after sleeping ``settle`` seconds first (as the
    daemon sleeps between collections, so caches are as cold as they are there)."""
    if settle:
        time.sleep(settle)
    return timed(fn)[1]


def median_cpu_ms(fn: Callable[[], object], repeats: int) -> float:
    """The median over ``repeats`` calls of ``fn`` of the milliseconds of this thread's CPU each takes."""
    return statistics.median(cpu_ms(fn) for _ in range(repeats))


def pread_floor(fds: Sequence[int], size: int = 64) -> Callable[[], None]:
    """A floor loop: one ``pread`` of ``size`` bytes at offset 0 of each of ``fds``, nothing else."""

    def floor() -> None:
        pread = os.pread
        for fd in fds:
            pread(fd, size, 0)

    return floor


@dataclass
class SimulatedHost:
    """A simulated host's files under ``root``: the host files and one device tree per device of ``shape``."""

    root: Path
    shape: Shape
    trees: list[DeviceTree]


@contextmanager
def simulated_host(shape_name: str) -> Iterator[SimulatedHost]:
    """A :class:`SimulatedHost` of the named shape in a temporary folder, removed (its trees closed) on exit."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shape = get_shape(shape_name)
        write_host_files(root, shape, DRIVER_VERSION, shape.lnc)
        trees = [DeviceTree(root, shape, i, DRIVER_VERSION) for i in range(shape.devices)]
        try:
            yield SimulatedHost(root, shape, trees)
        finally:
            for t in trees:
                t.close()
