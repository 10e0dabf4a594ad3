"""Packing queued datums into PutMetricData requests within the API limits.

``pack(queue, ...)`` pops datums from the left of a deque and returns one request's worth: at most 1000 datums, at
most ``max_bytes`` (estimated upper bound for the client's wire protocol), at most 150 values per datum. Samples of
one series that fall into the same storage bucket (the same minute, or the same second for high resolution) are
merged into one datum with ``Values``/``Counts``; CloudWatch aggregates a bucket anyway, so SampleCount, Sum, Min,
Max and percentiles are unchanged while a backlog drains in far fewer calls. Datums that do not fit are pushed
back in order, so nothing is split, lost or sent twice.
"""

from __future__ import annotations

from collections import deque

from neuron_monitor.exporters.cloudwatch.datum import Datum, datum_wire_size
from neuron_monitor.exporters.cloudwatch.limits import (
    MAX_DATUMS_PER_REQUEST,
    MAX_REQUEST_BYTES,
    MAX_VALUES_PER_DATUM,
)

REQUEST_OVERHEAD_BYTES = 2048  # action, version, namespace, headers' share; generous
SCAN_LIMIT = 50_000  # queued datums looked at per request while merging a backlog


def _bucket_key(d: Datum) -> tuple[object, ...]:
    return (d.name, d.unit, d.dims, d.resolution, int(d.timestamp // d.resolution))


def _merge_into(target: Datum, src: Datum) -> bool:
    """Add src's samples to target if the result keeps <= 150 distinct values. Returns False when it does not fit."""
    values = target.values if target.values is not None else [target.value]
    counts = target.counts if target.counts is not None else [1]
    index = {v: i for i, v in enumerate(values)}
    new = [v for v, _ in src.sample_values() if v not in index]
    if len(values) + len(set(new)) > MAX_VALUES_PER_DATUM:
        return False
    values, counts = list(values), list(counts)
    for v, c in src.sample_values():
        i = index.get(v)
        if i is None:
            index[v] = len(values)
            values.append(v)
            counts.append(c)
        else:
            counts[i] += c
    target.values, target.counts = values, counts
    target.timestamp = min(target.timestamp, src.timestamp)
    return True


def _copy(d: Datum) -> Datum:
    return Datum(
        d.name,
        d.unit,
        d.dims,
        d.timestamp,
        d.value,
        list(d.values) if d.values is not None else None,
        list(d.counts) if d.counts is not None else None,
        d.resolution,
    )


def pack(
    queue: deque[Datum],
    max_datums: int = MAX_DATUMS_PER_REQUEST,
    max_bytes: int = MAX_REQUEST_BYTES,
    protocol: str = "json",
    merge: bool = True,
    scan_limit: int = SCAN_LIMIT,
) -> list[Datum]:
    """Pop one request's datums from the left of ``queue``.

    Once the request is full, later datums are still scanned (up to ``scan_limit``) and merged into series already
    in the request; the ones that fit nowhere go back to the front of the queue in their original order.
    """
    budget = max_bytes - REQUEST_OVERHEAD_BYTES
    batch: dict[tuple[object, ...], Datum] = {}
    order: list[Datum] = []
    skipped: list[Datum] = []
    size = 0
    scanned = 0
    while queue and scanned < scan_limit:
        d = queue.popleft()
        scanned += 1
        key = _bucket_key(d)
        held = batch.get(key) if merge else None
        if held is not None:
            before = held.wire_size(protocol)
            snapshot = (held.values, held.counts, held.timestamp)
            if _merge_into(held, d):
                grown = held.wire_size(protocol) - before
                if size + grown <= budget:
                    size += grown
                    continue
                held.values, held.counts, held.timestamp = snapshot
            skipped.append(d)
            continue
        cost = datum_wire_size(d.name, d.unit, d.dims, len(d.values or ()) or 1, protocol)
        if len(order) >= max_datums or (order and size + cost > budget):
            skipped.append(d)
            if not merge:
                break
            continue
        d = _copy(d)
        size += cost
        order.append(d)
        if merge:
            batch[key] = d
    queue.extendleft(reversed(skipped))
    return order


def pack_all(datums: list[Datum], **kwargs: object) -> list[list[Datum]]:
    """Split a list of datums into requests (for the benchmark and tests)."""
    queue = deque(datums)
    requests: list[list[Datum]] = []
    while queue:
        requests.append(pack(queue, **kwargs))  # type: ignore[arg-type]
    return requests
