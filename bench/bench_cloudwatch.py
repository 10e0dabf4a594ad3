"""Benchmark of the CloudWatch exporter's per-report work on full simulated reports (prints figures, never fails).

For each shape: the simulator runs, the real daemon (every group, 1 s period) writes reports, and the third report
(counters and latencies filled in) is measured: datums per report, PutMetricData calls per report, datums and
bytes per call (the real JSON request body), EMF events and bytes, and CPU per report for mapping + limit checks
+ packing + encoding, as the median of repeated runs, with the cost of parsing the line (orjson) in the same process
as a baseline. Also: a 12-report backlog (one minute at 5 s) drained after an outage.

    python3 bench/bench_cloudwatch.py [--repeats 50] [--shapes trn1.32xlarge trn2.48xlarge]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.daemon_run import aws_groups_config, daemon_report_line
from bench.inprocess import median_cpu_ms
from neuron_monitor.exporters.cloudwatch.batching import pack
from neuron_monitor.exporters.cloudwatch.emf import encode_events
from neuron_monitor.exporters.cloudwatch.limits import DatumFilter
from neuron_monitor.exporters.cloudwatch.mapping import ReportMapper
from neuron_monitor.sim.temporary import TemporarySimulator

RUNTIMES = {"trn1.32xlarge": 2, "trn2.48xlarge": 16}


def simulated_report_line(shape: str, runtimes: int) -> bytes:
    with TemporarySimulator(shape, runtimes=runtimes, seed=1) as sim:
        line = daemon_report_line(aws_groups_config("1s"), ["--root", str(sim.root), "--no-imds"])
    report = orjson.loads(line)
    report["instance_info"].update(instance_id="i-0123456789abcdef0", instance_type=shape, error="")
    return orjson.dumps(report)


def requests_for(datums: list[Any]) -> list[list[Any]]:
    queue = deque(datums)
    out = []
    while queue:
        out.append(pack(queue, protocol="json"))
    return out


def body_bytes(batch: list[Any]) -> int:
    return len(json.dumps({"Namespace": "neuron_monitor", "MetricData": [d.to_api() for d in batch]}))


def bench_shape(shape: str, repeats: int) -> None:
    line = simulated_report_line(shape, RUNTIMES.get(shape, 4))
    report = orjson.loads(line)
    report["report_time"] = time.time()
    mapper, keep = ReportMapper(), DatumFilter()
    datums = keep.keep_valid(mapper.map(report))
    requests = requests_for(datums)
    sizes = [body_bytes(r) for r in requests]
    emf = encode_events(datums, "neuron_monitor")

    def per_report() -> None:
        for batch in requests_for(keep.keep_valid(mapper.map(report))):
            [d.to_api() for d in batch]

    parse = median_cpu_ms(lambda: orjson.loads(line), repeats)
    work = median_cpu_ms(per_report, repeats)
    emf_cpu = median_cpu_ms(lambda: encode_events(keep.keep_valid(mapper.map(report)), "ns"), repeats)

    backlog = []
    now = time.time()
    start = now - now % 60
    for i in range(12):
        r = dict(report, report_time=start + 5 * i)
        backlog.extend(mapper.map(r))
    backlog_requests = requests_for(backlog)

    print(f"\n== {shape}: {len(report['neuron_runtime_data'])} runtimes, report line {len(line)} bytes")
    print(f"datums per report            {len(datums)}")
    print(f"API calls per report         {len(requests)}")
    print(f"datums per call              {[len(r) for r in requests]}")
    print(f"bytes per call (JSON body)   {sizes}  (limit 1,000,000)")
    print(f"EMF events / bytes           {len(emf)} / {sum(len(x) for x in emf)}")
    print(f"CPU per report, api path     {work:.2f} ms  (median of {repeats}; parse alone {parse:.2f} ms,")
    print(f"                             ratio to parse {work / parse:.1f}x)")
    print(f"CPU per report, emf path     {emf_cpu:.2f} ms")
    print(
        f"12-report backlog (1 min)    {len(backlog)} samples -> {len(backlog_requests)} calls, "
        f"{[len(r) for r in backlog_requests]} datums, {[body_bytes(r) for r in backlog_requests]} bytes"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--shapes", nargs="+", default=["trn1.32xlarge", "trn2.48xlarge"])
    args = parser.parse_args()
    print(f"machine: {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}")
    for shape in args.shapes:
        bench_shape(shape, args.repeats)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"\npeak RSS of this process: {peak / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
