"""Reports counted from a thin decode (``counting.thin_native``: the compiled scanner nulls the values counting
never reads) against the twin, the line decoded whole: over real report lines (the replay recordings, AWS's
reports, the benchmark's trn2.48xlarge line), mutated (hostile numbers, wrong types, NaN text, bad UTF-8,
escapes, deep nesting, duplicate keys, truncation), fed in sequences so the ledger's history counts, the two
exporters end with the same stream counters (lines, reports, bad lines and the last error), the same accepted,
rejected and bad-input counts, the same ledger (totals and periods, in order, bit for bit), readiness, and the
same served families once the newest report is shaped (decoded whole again from its line). A line the scanner
gives a thin version of is always one orjson takes."""

from __future__ import annotations

import io
import json
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_monitor.exporters.prometheus.counting import thin_native
from neuron_monitor.exporters.prometheus.exposition import render_families
from neuron_monitor.exporters.prometheus.state import ExporterState
from neuron_monitor.native import NATIVE
from neuron_monitor.schema.stream import ReportStream
from tests.exporters.prometheus.prom_reports import runtime, trn2_report
from tests.replay.inputs import inputs


def _bench_line(i: int) -> bytes:
    runtimes = [
        runtime(1000 + d, f"job-{d:02d}", [4 * d + c for c in range(4)], completed=100 + i + d, generic_errors=i % 3)
        for d in range(16)
    ]
    return orjson.dumps(trn2_report(runtimes, report_time=1.7e9 + i, ecc=i % 2))


def _real_lines() -> list[bytes]:
    lines = [line.rstrip(b"\n") for recorded in inputs().values() for line in recorded[:3]]
    return [*lines, _bench_line(0), _bench_line(1), _bench_line(2)]


LINES = _real_lines()
TOKENS = [
    b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":", b"0", b"-1", b"1e999", b"1e99", b"NaN", b"Infinity", b"\xff",
    b"\xc3\xa9", b"\xed\xa0\x80", b"\x00", b"\x1f", b"\\ud800", b"\\u00e9", b"\\u0041", b" ", b"\t", b"null", b'"x"',
    b"1" * 50, b"-0", b"01", b"1.", b".5", b"[" * 100, b'{"a":' * 70, b"true", b"tru",
]  # fmt: skip
VALUES: list[Any] = [-1, -0.5, 1e300, 2**70, 2**53 + 1, "x", "7", None, [], {}, True, 1.5, 0, 1e12 + 1, "é" * 3]


def _containers(obj: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, dict | list):
                out.extend(_containers(v, (*path, k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            if isinstance(v, dict | list):
                out.extend(_containers(v, (*path, i)))
    return out


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    line = draw(st.sampled_from(LINES))
    kind = draw(st.sampled_from(["as is", "splice", "truncate", "value", "value", "duplicate", "number"]))
    if kind == "splice":
        at = draw(st.integers(0, len(line) - 1))
        width = draw(st.integers(0, 3))
        return line[:at] + draw(st.sampled_from(TOKENS)) + line[at + width :]
    if kind == "truncate":
        return line[: draw(st.integers(0, len(line) - 1))]
    if kind == "duplicate":  # a group (or a key in it) written twice: orjson keeps the last
        key = draw(
            st.sampled_from([b'"memory_used":', b'"system_data":', b'"vcpu_usage":', b'"period":', b'"usage_data":'])
        )
        at = line.find(key)
        if at < 0:
            return line
        extra = draw(st.sampled_from([b'{"period":2.0,"error":"x"},', b"null,", b"7,", b'{"fresh":false},']))
        return line[:at] + key + extra + line[at:]
    if kind == "number":  # a counted number replaced by a hostile one
        at = line.find(draw(st.sampled_from([b'"completed":', b'"mem_ecc_corrected":', b'"flops":', b'"user":'])))
        if at < 0:
            return line
        colon = line.index(b":", at) + 1
        end = colon
        while end < len(line) and line[end : end + 1] in b"0123456789.-+eE":
            end += 1
        hostile = [b"-5", b"1e400", b"123456789012345678901234567890", b"NaN", b'"3"', b"1e12", b"2.5e11", b"true"]
        return line[:colon] + draw(st.sampled_from(hostile)) + line[end:]
    if kind == "value":
        report = orjson.loads(line)
        path = draw(st.sampled_from(_containers(report)))
        obj = report
        for step in path:
            obj = obj[step]
        value = draw(st.sampled_from(VALUES))
        if isinstance(obj, dict) and obj:
            obj[draw(st.sampled_from(sorted(obj)))] = value
        elif isinstance(obj, list) and obj:
            obj[draw(st.integers(0, len(obj) - 1))] = value
        ascii_only = draw(st.booleans())  # "é" as UTF-8 bytes or as an escape
        return json.dumps(report, separators=(",", ":"), ensure_ascii=ascii_only).encode()  # 2**70 too
    return line


def _take(lines: list[bytes], fast: bool) -> dict[str, Any]:
    """Feed ``lines`` as the exporter does (thin when ``fast`` and the helper gives a thin version) and what the
    two must agree on."""
    stream = ReportStream(io.BytesIO())
    state = ExporterState(clock=lambda: 0.0, wall_clock=lambda: 1.7e9)
    for line in lines:
        report = stream.decode(line, thin_native if fast else None)
        if report is not None:
            state.apply(report, line if stream.thinned else None)
    view = state.view()
    ledger = state.builder.ledger
    return {
        "stream": (stream.stats.lines, stream.stats.reports, stream.stats.bad_lines, stream.stats.last_error),
        "state": (state.accepted_reports, state.rejected_reports, dict(state.bad_input_total), state.ready),
        "errors": dict(state.group_errors_total),
        "totals": [(s, [(k, v.hex()) for k, v in t.items()]) for s, t in ledger.totals.items()],
        "periods": list(ledger.periods.items()),
        "served": render_families(view.shaped.families, False) if view.shaped is not None else None,
        "blind": state.blind,
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(_mutated(), min_size=1, max_size=4), st.sampled_from(LINES))
def test_the_thin_native_decode_counts_what_the_whole_line_does(lines: list[bytes], last: bytes) -> None:
    for line in lines:
        thin = thin_native(line)
        if thin is not None:
            orjson.loads(line)  # never a line orjson refuses
            assert orjson.loads(thin).keys() == orjson.loads(line).keys()
    for sequence in (lines, [*lines, last]):  # ending on a bad line, and on a good one after them
        assert _take(sequence, fast=True) == _take(sequence, fast=False)


def test_the_thin_native_decode_takes_real_reports_and_nulls_only_unread_values() -> None:
    if NATIVE is None:
        return
    for line in LINES:
        if len(line) < 16 * 1024:
            continue
        thin = thin_native(line)
        assert thin is not None and len(thin) < len(line)
        whole, small = orjson.loads(line), orjson.loads(thin)
        assert small.get("report_time") == whole.get("report_time")
        usage = small["system_data"]["vcpu_usage"]["usage_data"]
        assert list(usage) == list(whole["system_data"]["vcpu_usage"]["usage_data"])  # its keys are counted
        assert set(usage.values()) == {None}
        for entry, thin_entry in zip(whole["neuron_runtime_data"], small["neuron_runtime_data"], strict=True):
            stats, thin_stats = entry["report"]["execution_stats"], thin_entry["report"]["execution_stats"]
            assert thin_stats["latency_stats"] is None
            assert {**thin_stats, "latency_stats": stats.get("latency_stats")} == stats  # the rest as it was
            memory = thin_entry["report"]["memory_used"]
            assert memory["period"] == entry["report"]["memory_used"]["period"]
            cores = entry["report"]["neuroncore_counters"]["neuroncores_in_use"]
            thin_cores = thin_entry["report"]["neuroncore_counters"]["neuroncores_in_use"]
            assert list(thin_cores) == list(cores)
            for core, data in cores.items():  # the FLOP rates stay, the rest of a core goes
                kept = {k: v for k, v in data.items() if k in ("flops", "effective_flops")}
                assert thin_cores[core] == {k: kept.get(k) for k in data}


def test_the_thin_native_decode_declines_what_orjson_might_refuse() -> None:
    if NATIVE is None:
        return
    line = LINES[-1]
    for bad in [b"[" * 100_000, b'{"a":' * 100, b"1e400", b"\xff", b'"\\ud800"', b"NaN", b"1" * 41, b'"\x01"']:
        assert thin_native(line[:-1] + b',"x":' + bad + b"}") is None
    assert thin_native(line[:-1] + b',"x":[1,2,{"y":"\\u00e9"}]}') is not None
    assert thin_native(b"[]") is None and thin_native(b"") is None and thin_native(line + b"x") is None


def test_a_key_spelled_with_an_escape_counts_as_the_key_orjson_reads() -> None:
    """Keys the rules keep (a NeuronCore's FLOP rates, a group's envelope) spelled with an escape: the scanner
    compares raw bytes, so it must leave such a line to the twin (or keep the value), never null what orjson
    reads as a kept key."""
    line = LINES[-1]
    for plain, escaped in [
        (b'"flops":', b'"fl\\u006fps":'),  # a NeuronCore's FLOP rate, counted
        (b'"memory_used":{"period":', b'"memory_used":{"p\\u0065riod":'),  # envelope keys beside bodies nulled
        (b'"error":"","fresh":true},"neuron_hw', b'"\\u0065rror":"x","fresh":true},"neuron_hw'),
    ]:
        assert plain in line
        respelled = line.replace(plain, escaped, 1)
        assert orjson.loads(respelled) == orjson.loads(
            line.replace(plain, escaped.replace(b"\\u006f", b"o").replace(b"\\u0065", b"e"), 1)
        )
        thin = thin_native(respelled)
        if thin is not None:
            orjson.loads(thin)
        assert _take([respelled], fast=True) == _take([respelled], fast=False)
