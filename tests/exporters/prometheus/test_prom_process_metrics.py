"""``ProcessMetrics`` serves what client_python's process, platform and GC collectors serve (its careful twins):
the same families in the same order, names, types, help texts and labels, and the same values (those that move
between two reads within their tolerance)."""

from __future__ import annotations

import gc
import math

from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR
from prometheus_client.metrics_core import Metric

from neuron_monitor.exporters.prometheus.exposition import render_families
from neuron_monitor.exporters.prometheus.process_metrics import ProcessMetrics, ProcessReading

MOVING = {  # values that may move between the two reads, and by how much
    "process_virtual_memory_bytes": 64 * 1024 * 1024,
    "process_resident_memory_bytes": 64 * 1024 * 1024,
    "process_cpu_seconds_total": 5.0,
    "process_open_fds": 4,
    "python_gc_objects_collected_total": math.inf,
    "python_gc_collections_total": math.inf,
}


def _samples(metrics: list[Metric]) -> list[tuple[str, str, str, tuple[tuple[str, str], ...], str, float]]:
    return [
        (m.name, m.type, m.documentation, tuple(sorted(s.labels.items())), s.name, s.value)
        for m in metrics
        for s in m.samples
    ]


def test_same_families_and_values_as_client_pythons_collectors() -> None:
    ours = _samples(list(ProcessMetrics().collect()))
    theirs = _samples([m for c in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR) for m in c.collect()])
    assert [row[:5] for row in ours] == [row[:5] for row in theirs]
    for mine, other in zip(ours, theirs, strict=True):
        tolerance = MOVING.get(mine[4], 0.0)
        assert abs(mine[5] - other[5]) <= tolerance, (mine, other)


def test_without_proc_only_the_python_families_remain() -> None:
    names = [f.name for f in ProcessMetrics(proc="/nonexistent").families()]
    assert names == [
        "python_info",
        "python_gc_objects_collected",
        "python_gc_objects_uncollectable",
        "python_gc_collections",
    ]


def test_text_is_what_its_families_render_to() -> None:
    """``text`` (a template filled with the values) against rendering ``families()`` (its careful twin), for every
    shape: all six process readings, four (no descriptor listing), none (no /proc), in both formats."""
    gc.disable()  # the GC figures must not move between the two reads
    try:
        for readings in (
            [1.0e9, 3.0e7, 1.7e9, 12.25],
            [1.0e9, 3.0e7, 1.7e9, 12.25, 9.0, 1024.0],
            [],
            [2.0e9, -0.0, 1.0e16, math.inf, 10.0, 65536.0],
        ):
            metrics = ProcessMetrics()
            metrics._readings = lambda r=readings: ProcessReading(*r, gc_stats=gc.get_stats())  # type: ignore[method-assign]
            for openmetrics in (False, True):
                for _ in range(2):  # the template's first use, and its reuse
                    assert metrics.text(openmetrics) == render_families(metrics.families(), openmetrics)
    finally:
        gc.enable()


def test_text_follows_the_live_process() -> None:
    metrics = ProcessMetrics()
    text = metrics.text(False)
    assert "process_cpu_seconds_total " in text and "python_gc_collections_total{generation=" in text


def test_open_descriptors_from_the_directory_size_or_by_listing() -> None:
    """Linux 6.2+ gives the count as the size of /proc/self/fd; older kernels (size 0) are listed instead. Both
    count the same descriptors, give or take the one each way holds while it counts."""
    sized = ProcessMetrics()
    listed = ProcessMetrics()
    listed._fd_dir = -1  # as on a kernel whose /proc/self/fd has no size: the entries are counted
    counts = sized._open_fds(), listed._open_fds()
    assert min(counts) > 0 and abs(counts[0] - counts[1]) <= 2


def test_scrapes_within_read_every_share_one_reading() -> None:
    """``text`` reads the process at most every ``read_every`` seconds (the same text object meanwhile, which a
    scrape's tail reuses whole); with ``read_every=0`` each call reads again. Both render what ``families()``
    renders for the reading they serve."""
    reads: list[int] = []
    metrics = ProcessMetrics(read_every=3600.0)
    real = metrics._readings

    def counted() -> ProcessReading:
        reads.append(1)
        return real()

    metrics._readings = counted  # type: ignore[method-assign]
    first = metrics.text(False)
    assert metrics.text(False) is first and len(reads) == 1
    assert metrics.text(True) != first and len(reads) == 1  # the other format, from the same reading
    metrics.read_every = 0.0
    metrics.text(False)
    assert len(reads) == 2
    gc.disable()  # the GC figures must not move between the two reads
    try:
        metrics.read_every = 3600.0
        metrics._readings = lambda: ProcessReading(1e9, 3e7, 1.7e9, 12.25, 9.0, 1024.0, gc.get_stats())  # type: ignore[method-assign]
        metrics._kept = None
        for openmetrics in (False, True):
            assert metrics.text(openmetrics) == render_families(metrics.families(), openmetrics)
    finally:
        gc.enable()
