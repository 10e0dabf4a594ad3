"""The trace converter: Trace Event Format validity in every grouping, the tracks and values, filters, merging."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_monitor.timeline.convert import run
from neuron_monitor.timeline.detect import Detector
from neuron_monitor.timeline.selection import Selection
from neuron_monitor.timeline.trace import GROUP_BY
from neuron_monitor.timeline.trace_writer import TraceWriter

from . import tef
from .factory import T0, Rt, record, report

US = 1_000_000


def workload(instance: str = "i-a", n: int = 12, offset: float = 0.0) -> list[dict[str, Any]]:
    """Two runtimes on a 4-device, 8-core host; 'serve' exits after report 7; errors and ECC on the way."""
    reps = []
    for i in range(n):
        rts = [Rt(100, "train", [0, 1, 2], util=10.0 * (i % 3), completed=50 + i,
                  errors={"numerical": 2} if i in (3, 4) else {}, tensors=(1 << 20) * (1 + i // 4))]  # fmt: skip
        if i < 8:
            rts.append(Rt(200, "serve", [4], util=30.0, outcomes={"failed_to_queue": 3} if i == 6 else {}))
        reps.append(report(T0 + offset + i, rts, instance=instance, ecc={3: (1, 0)} if i == 5 else None))
    return reps


def convert(tmp_path: Path, recordings: list[Path], group_by: str = "instance", **sel: Any) -> list[dict[str, Any]]:
    out = tmp_path / f"trace-{group_by}.json"
    selection = Selection.from_options(
        sel.get("cores"), sel.get("types"), sel.get("instances"), sel.get("ignore_host", False)
    )
    run([str(r) for r in recordings], selection, Detector(selection), str(out), group_by)
    return tef.check_trace(out)


@pytest.mark.parametrize("group_by", GROUP_BY)
def test_every_grouping_is_valid_trace_event_format(tmp_path: Path, group_by: str) -> None:
    a = record(tmp_path / "a.gz", workload("i-a"))
    b = record(tmp_path / "b.gz", workload("i-b", offset=0.25))
    events = convert(tmp_path, [a, b], group_by)
    names = tef.process_names(events).values()
    assert any("i-a" in n for n in names) and any("i-b" in n for n in names)
    kinds = {e["ph"] for e in events}
    assert {"M", "C", "X"} <= kinds


def test_instance_grouping_tracks_and_values(tmp_path: Path) -> None:
    rec = record(tmp_path / "a.gz", workload("i-a"))
    events = convert(tmp_path, [rec])
    assert list(tef.process_names(events).values()) == ["i-a (trn1.32xlarge)"]
    c = tef.counters(events, "i-a (trn1.32xlarge)")
    # utilization cycles 0, 10, 20: every change written at the start of its period, no repeats
    util = c["NC 0 utilization"]
    assert [ts for ts, _ in util][:3] == [(T0 - 1) * US, T0 * US, (T0 + 1) * US]
    assert [a["percent"] for _, a in util][:4] == [0.0, 10.0, 20.0, 0.0]
    # device 0 holds cores 0 and 1 of 'train': memory by category, summed over the cores
    mem = c["ND 0 memory"]
    assert mem[0][1] == {"constants": 2000, "model_code": 4000, "model_shared_scratchpad": 0,
                         "runtime_memory": 0, "tensors": 2 << 20}  # fmt: skip
    assert [a["tensors"] for _, a in mem] == [2 << 20, 4 << 20, 6 << 20]  # written only when it changes
    # 'serve' (core 4, device 2) vanished after report 7: its tracks drop to 0 at its last report
    assert c["ND 2 memory"][-1] == ((T0 + 7) * US, dict.fromkeys(mem[0][1], 0))
    assert c["NC 4 utilization"][-1] == ((T0 + 7) * US, {"percent": 0.0})
    assert c["serve[200] executions/s"][-1][1] == {"completed": 0, "failed": 0}
    assert c["train[100] executions/s"][0][1] == {"completed": 50.0, "failed": 0.0}
    assert c["train[100] latency ms"][0][1] == {"p50": 2.0, "p99": 4.0}
    assert {"host vCPU %", "host memory", "train[100] vCPU %"} <= set(c)
    # slices: lifetimes and error episodes with their details, one thread each
    threads = tef.thread_names(events)
    slices = {(threads[(e["pid"], e["tid"])], e["name"]): e for e in events if e["ph"] == "X"}
    life = slices[("serve[200]", "serve[200]")]
    assert (life["ts"], life["dur"]) == ((T0 - 1) * US, 8 * US)
    num = slices[("train[100] numerical_error", "numerical_error")]
    assert (num["ts"], num["dur"]) == ((T0 + 2) * US, 2 * US)
    assert num["args"] == {"runtime_tag": "train", "pid": 100, "count": 4, "periods": 2}
    assert num["cname"] == "terrible"
    assert slices[("ND 3 ecc_uncorrected", "ecc_uncorrected")]["args"]["mem_ecc_uncorrected"] == 1
    assert slices[("serve[200] failed_to_queue", "failed_to_queue")]["args"]["count"] == 3


def test_groupings_place_tracks(tmp_path: Path) -> None:
    rec = record(tmp_path / "a.gz", workload("i-a"))
    ev = convert(tmp_path, [rec], "neuroncore")
    assert {"i-a NC 0", "i-a NC 4", "i-a (trn1.32xlarge) host"} <= set(tef.process_names(ev).values())
    assert {"utilization", "flops", "memory"} <= set(tef.counters(ev, "i-a NC 0"))
    ev = convert(tmp_path, [rec], "device")
    dev0 = tef.counters(ev, "i-a ND 0")
    assert {"NC 0 utilization", "NC 1 utilization", "memory"} <= set(dev0) and "NC 4 utilization" not in dev0
    ev = convert(tmp_path, [rec], "process")
    train = tef.counters(ev, "i-a train[100]")
    assert {"executions/s", "latency ms", "NC 0 utilization", "ND 0 memory", "ND 1 memory"} <= set(train)
    assert train["ND 1 memory"][0][1]["tensors"] == 1 << 20  # core 2 only


def test_filters(tmp_path: Path) -> None:
    rec = record(tmp_path / "a.gz", workload("i-a"))
    other = record(tmp_path / "b.gz", workload("i-b"))
    ev = convert(tmp_path, [rec, other], cores="4-7", instances="i-a")
    c = tef.counters(ev)
    assert all(k.startswith("i-a") for k in c)
    assert not any("train[100]" in k or "NC 0 " in k for k in c)  # train works on cores 0-2 only
    assert any("NC 4 utilization" in k for k in c)
    ev = convert(tmp_path, [rec], types="errors")
    assert {e["ph"] for e in ev} == {"M", "X"} and all(e["cat"] != "runtime" for e in ev if e["ph"] == "X")
    ev = convert(tmp_path, [rec], ignore_host=True)
    assert not any("vCPU" in k or "host memory" in k for k in tef.counters(ev))


def test_multi_node_recordings_share_one_clock(tmp_path: Path) -> None:
    a = record(tmp_path / "a.gz", workload("i-a"))
    b = record(tmp_path / "b.gz", workload("i-b", offset=0.5))
    ev = convert(tmp_path, [a, b])
    c = tef.counters(ev)
    first_a = c["i-a (trn1.32xlarge)/NC 0 utilization"][0][0]
    first_b = c["i-b (trn1.32xlarge)/NC 0 utilization"][0][0]
    assert first_b - first_a == US // 2


def test_writer_keeps_tracks_valid() -> None:
    buf = io.BytesIO()
    w = TraceWriter(buf)
    pid = w.process("p", "p", 0)
    assert w.counter(pid, "c", 10.0, {"v": 1.0}, "x")
    assert not w.counter(pid, "c", 11.0, {"v": 1.0}, "x")  # unchanged: held by the previous sample
    assert w.counter(pid, "c", 9.0, {"v": 2.0, "nan": float("nan")}, "x")  # earlier: clamped, NaN dropped
    assert not w.counter(pid, "d", 9.0, {"v": None}, "x")
    tid = w.thread(pid, "t", "t")
    w.complete(pid, tid, "s", 5.0, 4.0, "x", {})  # end before start: zero length
    w.close({})
    events = __import__("json").loads(buf.getvalue())["traceEvents"]
    tef.check_events(events)
    assert [e["ts"] for e in events if e["ph"] == "C"] == [10 * US, 10 * US]
    assert [e["args"] for e in events if e["ph"] == "C"] == [{"v": 1.0}, {"v": 2.0}]
    assert w.unchanged == 1 and w.clamped == 1
    assert [e["dur"] for e in events if e["ph"] == "X"] == [0]


def test_resolution_averages_counters_per_window(tmp_path: Path) -> None:
    rec = record(tmp_path / "a.gz", workload("i-a", n=12))
    out = tmp_path / "coarse.json"
    sel = Selection()
    run([str(rec)], sel, Detector(sel), str(out), resolution=3.0)
    events = tef.check_trace(out)
    c = tef.counters(events, "i-a (trn1.32xlarge)")
    util = c["NC 0 utilization"]
    # samples start at T0-1 .. T0+10 (utilization 0, 10, 20, ...): windows of 3 s aligned on the epoch
    base = (T0 - 1) // 3 * 3
    assert all((ts / US - base) % 3 == 0 for ts, _ in util)
    assert len(util) <= 5
    # every full window averages one 0, one 10 and one 20
    assert {a["percent"] for _, a in util[1:-1]} == {10.0}
    # 'serve' still drops to exactly 0 when it ends, not to an average
    assert c["NC 4 utilization"][-1] == ((T0 + 7) * US, {"percent": 0.0})
    assert c["serve[200] executions/s"][-1][1] == {"completed": 0, "failed": 0}


def test_time_range_limits_reports_and_problems(tmp_path: Path) -> None:
    rec = record(tmp_path / "a.gz", workload("i-a", n=12))
    sel = Selection.from_options(None, None, None, False, start=str(T0 + 5), end="2026-01-01T12:00:09Z")
    out = tmp_path / "window.json"
    result = run([str(rec)], sel, Detector(sel), str(out))
    events = tef.check_trace(out)
    stamps = [e["ts"] for e in events if e["ph"] == "C"]
    assert min(stamps) >= (T0 + 4) * US and max(stamps) <= (T0 + 9) * US
    assert {p.kind for p in result.problems} == {"ecc_uncorrected", "failed_to_queue", "runtime_vanished"}
    with pytest.raises(ValueError, match="before its start"):
        Selection.from_options(None, None, None, False, start=str(T0 + 5), end=str(T0))
    with pytest.raises(ValueError, match="bad time"):
        Selection.from_options(None, None, None, False, start="yesterday")


runtime_st = st.builds(
    lambda pid, first, fresh, err, util, p50: Rt(
        pid, f"job{pid}", [first, first + 1], util=util, fresh=fresh,
        errors={"numerical": err} if err else {}, p50=p50, p99=p50,
    ),
    st.sampled_from([100, 200, 300]),
    st.sampled_from([0, 2, 4]),
    st.booleans(),
    st.integers(min_value=0, max_value=2),
    st.sampled_from([0.0, 25.0, 50.0]),
    st.sampled_from([None, 0.001]),
)  # fmt: skip


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(
        st.tuples(st.lists(runtime_st, max_size=3, unique_by=lambda r: r.pid), st.floats(0.2, 3.0), st.booleans()),
        min_size=1,
        max_size=12,
    ),
    group_by=st.sampled_from(GROUP_BY),
    resolution=st.sampled_from([0.0, 2.0]),
)
def test_any_report_sequence_gives_a_valid_trace(
    tmp_path: Path, steps: list[tuple[list[Rt], float, bool]], group_by: str, resolution: float
) -> None:
    """Runtimes coming and going, carried-over groups, uneven periods, errors: always valid Trace Event Format."""
    t = T0
    reports = []
    for rts, gap, ecc in steps:
        t += gap
        reports.append(report(t, rts, period=gap, ecc={1: (1, 0)} if ecc else None, system_fresh=not ecc))
    path = tmp_path / f"h-{len(reports)}-{group_by}.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in reports))
    out = tmp_path / "h.json"
    sel = Selection()
    run([str(path)], sel, Detector(sel, hang_periods=1), str(out), group_by, highlight=True, resolution=resolution)
    tef.check_trace(out)


def test_an_episode_is_one_slice_in_each_process_it_touches(tmp_path: Path) -> None:
    rec = record(tmp_path / "a.gz", workload("i-a"))
    for group_by, expected in (("neuroncore", 3 + 2), ("device", 2 + 1), ("instance", 1 + 1)):
        events = convert(tmp_path, [rec], group_by)
        names = tef.process_names(events)
        slices = [(names[e["pid"]], e["name"]) for e in events if e["ph"] == "X" and e["cat"] != "runtime"]
        numerical = [s for s in slices if s[1] == "numerical_error"]
        ecc = [s for s in slices if s[1] == "ecc_uncorrected"]
        # train works on cores 0-2 (devices 0, 1); ECC hit device 3 (cores 6, 7)
        assert len(numerical) + len(ecc) == expected, (group_by, slices)
        assert len(set(numerical)) == len(numerical) and len(set(ecc)) == len(ecc)


@pytest.mark.parametrize("group_by", ["instance", "device", "neuroncore"])
def test_a_runtime_group_that_cannot_be_read_is_no_zero(tmp_path: Path, group_by: str) -> None:
    """A runtime still there whose neuroncore_counters carry an error (left out as unreadable) for reports 3-5:
    its cores get no sample then (before: they dropped to 0 %, an idle core that nobody measured), and a grey
    "neuroncore_counters unreadable" slice on a "<tag>[pid] unreadable" thread covers those periods. When the
    runtime leaves, its cores still drop to 0."""
    reports = []
    for i in range(10):
        r = report(T0 + i, [Rt(100, "train", [3], util=40.0 + i)] if i < 8 else [])
        if 3 <= i <= 5:
            counters = r["neuron_runtime_data"][0]["report"]["neuroncore_counters"]
            counters.update(neuroncores_in_use={}, error="cannot read the runtime's counters")
        reports.append(r)
    events = convert(tmp_path, [record(tmp_path / "rec.gz", reports)], group_by)
    samples = [
        (ts, args["percent"])
        for name, track in tef.counters(events).items()
        if name.endswith("NC 3 utilization") or name.endswith("/utilization")
        for ts, args in track
    ]
    us = 1_000_000
    assert [ts for ts, v in samples if v == 0] == [round((T0 + 7) * us)], samples  # only when the runtime left
    assert not [ts for ts, _ in samples if round((T0 + 2) * us) <= ts < round((T0 + 5) * us)], samples
    threads = tef.thread_names(events)
    gap_tids = {key for key, name in threads.items() if name == "train[100] unreadable"}
    assert gap_tids, threads
    gaps = [e for e in events if e["ph"] == "X" and (e["pid"], e["tid"]) in gap_tids]
    assert {(e["name"], e["ts"], e["dur"]) for e in gaps} == {
        ("neuroncore_counters unreadable", round((T0 + 2) * us), 3 * us)
    }, gaps
