"""The detector on constructed report sequences: each problem kind, episodes, thresholds, filters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from neuron_monitor.timeline.detect import Detector, Problem, format_details, parse_details
from neuron_monitor.timeline.extract import parse_snapshot
from neuron_monitor.timeline.selection import Selection

from .factory import T0, Rt, report


def detect(reports: list[dict[str, Any]], **options: Any) -> list[Problem]:
    det = Detector(**options)
    for rep in reports:
        det.feed(parse_snapshot(rep, rep["report_time"], "rec"))
    return det.finish()


def series(n: int, make: Callable[[int], list[Rt]], **kw: Any) -> list[dict[str, Any]]:
    return [report(T0 + i, make(i), **kw) for i in range(n)]


def test_clean_run_has_no_problems() -> None:
    assert detect(series(20, lambda i: [Rt(100, "train", [0, 1]), Rt(200, "serve", [2])])) == []


def test_numerical_errors_become_one_episode_with_the_example_line() -> None:
    def rts(i: int) -> list[Rt]:
        return [Rt(100, "train", [3], errors={"numerical": 1} if 5 <= i <= 9 else {})]

    problems = detect(series(15, rts))
    assert len(problems) == 1
    p = problems[0]
    assert (p.kind, p.subject, p.start, p.end) == ("numerical_error", "NC 3", T0 + 4, T0 + 9)
    assert p.details == {"runtime_tag": "train", "pid": 100, "count": 5, "periods": 5}
    assert p.line() == "numerical_error NC 3 @ 12:00:04 - 12:00:09: " + format_details(p.details)
    assert parse_details(p.line().split(": ", 1)[1]) == p.details


def test_separate_bursts_are_separate_unless_merged() -> None:
    def rts(i: int) -> list[Rt]:
        return [Rt(100, "train", [0, 1], outcomes={"failed_to_queue": 10} if i in (3, 4, 7) else {})]

    assert [(p.kind, p.details["count"]) for p in detect(series(12, rts))] == [
        ("failed_to_queue", 20),
        ("failed_to_queue", 10),
    ]
    merged = detect(series(12, rts), merge_gap=3.0)
    assert [(p.start, p.end, p.details["count"]) for p in merged] == [(T0 + 2, T0 + 7, 30)]


def test_carried_over_periods_neither_count_nor_close() -> None:
    def rts(i: int) -> list[Rt]:
        return [Rt(100, "t", [0], errors={"hardware": 2} if i in (2, 4) else {}, fresh=i != 3)]

    # report 3 repeats report 2's data (not fresh): the episode spans 2..4 with 4 errors, not 6
    problems = detect(series(8, rts))
    assert [(p.kind, p.start, p.end, p.details["count"]) for p in problems] == [("hardware_error", T0 + 1, T0 + 4, 4)]


def test_ecc_uncorrected_per_device() -> None:
    reps = [report(T0 + i, [Rt(1, "a", [0])], ecc={2: (1, 0)} if i == 3 else {2: (0, 2)} if i == 4 else None)
            for i in range(8)]  # fmt: skip
    problems = detect(reps)
    assert len(problems) == 1
    p = problems[0]
    assert (p.kind, p.subject, p.device, p.cores) == ("ecc_uncorrected", "ND 2", 2, (4, 5))
    assert p.details == {"mem_ecc_uncorrected": 1, "sram_ecc_uncorrected": 2, "count": 3, "periods": 2}


def test_hang_needs_earlier_work_loaded_models_and_enough_idle_periods() -> None:
    def hung_after(k: int) -> Callable[[int], list[Rt]]:
        return lambda i: [Rt(100, "train", [0, 1], util=0.0 if i >= k else 80.0, completed=0 if i >= k else 50)]

    problems = detect(series(20, hung_after(5)), hang_periods=10)
    assert [(p.kind, p.subject, p.start, p.end) for p in problems] == [("hang_suspected", "NC 0-1", T0 + 4, T0 + 19)]
    assert problems[0].details == {"runtime_tag": "train", "pid": 100, "periods": 15, "loaded_models": 1,
                                   "ongoing": True}  # fmt: skip
    assert detect(series(12, hung_after(5)), hang_periods=10) == []  # only 7 idle periods
    assert detect(series(20, hung_after(0)), hang_periods=3) == []  # never worked: an idle server, not a hang
    no_models = lambda i: [Rt(100, "t", [0], util=0.0 if i >= 3 else 80.0, models=0)]  # noqa: E731
    assert detect(series(20, no_models), hang_periods=3) == []


def test_hang_ends_when_work_resumes() -> None:
    def rts(i: int) -> list[Rt]:
        return [Rt(100, "train", [0], util=0.0 if 5 <= i < 12 else 60.0, completed=0 if 5 <= i < 12 else 9)]

    problems = detect(series(20, rts), hang_periods=4)
    assert [(p.kind, p.start, p.end, p.details.get("ongoing")) for p in problems] == [
        ("hang_suspected", T0 + 4, T0 + 11, None)
    ]


def test_vanished_runtime_and_its_open_episode() -> None:
    def rts(i: int) -> list[Rt]:
        out = [Rt(100, "train", [0])]
        if i < 6:
            out.append(Rt(200, "serve", [2, 3], outcomes={"timed_out": 1} if i == 5 else {}))
        return out

    problems = detect(series(10, rts))
    assert [(p.kind, p.subject, p.start, p.end) for p in problems] == [
        ("timed_out", "NC 2-3", T0 + 4, T0 + 5),
        ("runtime_vanished", "NC 2-3", T0 + 5, T0 + 6),
    ]
    assert "ongoing" not in problems[0].details


def test_filters_apply_to_problems() -> None:
    def rts(i: int) -> list[Rt]:
        e = {"numerical": 1} if i == 2 else {}
        return [Rt(100, "a", [0], errors=e), Rt(200, "b", [4], errors=e, outcomes={"timed_out": 1} if i == 2 else {})]

    reps = series(5, rts)
    assert len(detect(reps)) == 3
    assert [p.details["pid"] for p in detect(reps, selection=Selection(cores=frozenset({4, 5})))] == [200, 200]
    only = Selection.from_options(None, "timed_out", None, False)
    assert [p.kind for p in detect(reps, selection=only)] == ["timed_out"]
    assert detect(reps, selection=Selection(instances=frozenset({"i-other"}))) == []


def test_instances_are_kept_apart() -> None:
    a = series(6, lambda i: [Rt(100, "t", [0], errors={"numerical": 1} if i == 2 else {})], instance="i-a")
    b = series(6, lambda i: [Rt(100, "t", [0])], instance="i-b")
    merged = sorted(a + b, key=lambda r: (r["report_time"], r["instance_info"]["instance_id"]))
    problems = detect(merged)
    assert [(p.kind, p.instance) for p in problems] == [("numerical_error", "i-a")]
    assert "instance_id" in problems[0].line(with_instance=True)


def test_details_are_key_value_pairs_that_split_back() -> None:
    details = {"runtime_tag": "my job", "pid": 7, "ongoing": True, "share": 0.5, "tag2": "true", "n": "12", "e": ""}
    text = format_details(details)
    assert text == 'runtime_tag="my job" pid=7 ongoing=true share=0.5 tag2="true" n="12" e=""'
    assert parse_details(text) == details
    assert "{" not in text and "'" not in text


def _telemetry(rep: dict[str, Any], unhealthy: dict[int, list[str]], repairable: dict[int, int]) -> dict[str, Any]:
    rep["system_data"]["neuron_device_telemetry"] = {
        "period": 1.0,
        "fresh": True,
        "error": "",
        "neuron_devices": [
            {"neuron_device_index": d, "healthy": not unhealthy.get(d), "unhealthy_components": unhealthy.get(d, []),
             "ecc": {"mem_ecc_repairable_uncorrected": repairable.get(d, 0)}}
            for d in range(4)
        ],
    }  # fmt: skip
    return rep


def test_unhealthy_device_and_repairable_ecc() -> None:
    reps = [
        _telemetry(
            report(T0 + i, [Rt(1, "a", [0])]),
            {1: ["hbm"] if i in (2, 3) else [], 3: ["link_efa"] if i >= 6 else []},
            {2: 3 if i == 4 else 0},
        )
        for i in range(8)
    ]
    problems = {(p.kind, p.subject): p for p in detect(reps)}
    assert set(problems) == {
        ("device_unhealthy", "ND 1"),
        ("device_unhealthy", "ND 3"),
        ("ecc_repairable_uncorrected", "ND 2"),
    }
    one = problems[("device_unhealthy", "ND 1")]
    assert (one.start, one.end, one.details, one.cores) == (T0 + 2, T0 + 3, {"components": "hbm"}, (2, 3))
    assert problems[("device_unhealthy", "ND 3")].details == {"components": "link_efa", "ongoing": True}
    ecc = problems[("ecc_repairable_uncorrected", "ND 2")]
    assert (ecc.details["count"], ecc.device) == (3, 2)
    only = detect(reps, selection=Selection(event_types=frozenset({"ecc_repairable_uncorrected"})))
    assert [p.kind for p in only] == ["ecc_repairable_uncorrected"]
