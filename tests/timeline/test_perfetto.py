"""A real consumer: Perfetto's trace processor loads our traces and sees every counter sample and slice.

Needs the ``perfetto`` Python package and a local ``trace_processor_shell`` binary named by the environment variable
PERFETTO_TRACE_PROCESSOR (the package otherwise downloads the binary at run time, which this build cannot do).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from neuron_monitor.timeline.convert import run
from neuron_monitor.timeline.detect import Detector
from neuron_monitor.timeline.selection import Selection

from . import tef
from .factory import record
from .test_trace import workload

BINARY = os.environ.get("PERFETTO_TRACE_PROCESSOR", "")


@pytest.mark.skipif(not BINARY or not Path(BINARY).exists(), reason="PERFETTO_TRACE_PROCESSOR binary not given")
def test_perfetto_trace_processor_loads_the_trace(tmp_path: Path) -> None:
    tp_mod = pytest.importorskip("perfetto.trace_processor")
    rec = record(tmp_path / "a.gz", workload("i-a"))
    out = tmp_path / "trace.json"
    run([str(rec)], Selection(), Detector(), str(out), highlight=True)
    events = tef.check_trace(out)
    tp = tp_mod.TraceProcessor(trace=str(out), config=tp_mod.TraceProcessorConfig(bin_path=BINARY))
    try:
        counters = next(iter(tp.query("select count(*) as n from counter"))).n
        slices = next(iter(tp.query("select count(*) as n from slice"))).n
        processes = {r.name for r in tp.query("select name from process where name is not null")}
    finally:
        tp.close()
    # one counter row per argument of every C event; every X becomes a slice
    assert counters == sum(len(e["args"]) for e in events if e["ph"] == "C")
    assert slices >= sum(1 for e in events if e["ph"] == "X")
    assert "i-a (trn1.32xlarge)" in processes
