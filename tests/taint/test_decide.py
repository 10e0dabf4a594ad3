"""The planner's decisions on a fake clock: grace, unknown, hold, node cap, unmapped devices, effect updates, and
the rate limit under a flapping device."""

from __future__ import annotations

from neuron_monitor.taint.decide import Planner, RateLimit
from neuron_monitor.taint.rules import OwnRule

MAP = {i: ("node-a", f"neurondevice{i}") for i in range(16)}
BAD = ("unhealthy", "ecc_uncorrected")
GOOD = ("healthy", "")
UNKNOWN = ("unknown", "")


def rule(i: int, effect: str = "None") -> OwnRule:
    return OwnRule(
        f"neuron-monitor-node-a-neurondevice{i}", "node-a", f"neurondevice{i}", "ecc_uncorrected", effect, "7"
    )


def actions(planner: Planner, now: float, rules: dict | None = None, **kw: object) -> list[tuple[str, int | None]]:
    plan = planner.plan(now, MAP, rules or {}, **kw)  # type: ignore[arg-type]
    return [(c.action, c.index) for c in plan.changes]


def test_a_device_is_tainted_only_after_the_grace_period_and_with_the_rule_that_fired() -> None:
    p = Planner(grace=60, hold=300, node_cap=2, effect="None")
    p.observe({0: BAD, 1: GOOD}, 0)
    assert actions(p, 59) == []
    p.observe({0: BAD, 1: GOOD}, 60)
    plan = p.plan(60, MAP, {})
    assert [(c.action, c.index, c.key, c.value) for c in plan.changes] == [
        ("create", 0, ("node-a", "neurondevice0"), "ecc_uncorrected")
    ]


def test_unknown_never_taints_and_breaks_the_unhealthy_run() -> None:
    p = Planner(grace=60, hold=300, node_cap=2, effect="None")
    for t in range(0, 600, 5):
        p.observe({0: UNKNOWN}, t)
    assert actions(p, 600) == []
    p.observe({0: BAD}, 600)
    p.observe({0: UNKNOWN}, 650)
    p.observe({0: BAD}, 655)
    assert actions(p, 700) == []  # the run began again at 655
    assert actions(p, 715) == [("create", 0)]


def test_a_device_missing_from_a_report_is_not_tainted_and_not_cleared() -> None:
    p = Planner(grace=0, hold=0, node_cap=2, effect="None")
    p.observe({0: GOOD}, 0)
    p.observe({}, 10)  # no health group in this report
    assert actions(p, 10, {("node-a", "neurondevice0"): rule(0)}) == []


def test_the_rule_goes_only_after_the_hold_time_healthy() -> None:
    p = Planner(grace=60, hold=300, node_cap=2, effect="None")
    rules = {("node-a", "neurondevice0"): rule(0)}
    p.observe({0: GOOD}, 1000)
    assert actions(p, 1299, rules) == []
    p.observe({0: UNKNOWN}, 1299)
    p.observe({0: GOOD}, 1300)
    assert actions(p, 1599, rules) == []
    assert actions(p, 1600, rules) == [("delete", 0)]


def test_an_adopted_rule_with_another_effect_is_updated_to_the_configured_one() -> None:
    p = Planner(grace=60, hold=300, node_cap=2, effect="NoSchedule")
    p.observe({0: BAD}, 0)
    assert actions(p, 1, {("node-a", "neurondevice0"): rule(0, "None")}) == [("update", 0)]
    assert actions(p, 1, {("node-a", "neurondevice0"): rule(0, "NoSchedule")}) == []


def test_node_cap_refuses_past_n_devices_unless_an_independent_read_confirms() -> None:
    p = Planner(grace=0, hold=300, node_cap=2, effect="None")
    p.observe({i: BAD for i in range(16)}, 0)
    plan = p.plan(0, MAP, {})
    assert [c.index for c in plan.changes] == [0, 1]
    assert {(r.reason, r.index) for r in plan.refused} == {("node_cap", i) for i in range(2, 16)}
    held = {("node-a", f"neurondevice{i}"): rule(i) for i in (0, 1)}
    assert actions(p, 1, held) == []
    asked: list[int] = []

    def confirm(index: int) -> bool:
        asked.append(index)
        return index == 5

    assert actions(p, 1, held, confirm=confirm) == [("create", 5)]
    assert 5 in asked


def test_a_device_without_a_dra_name_is_refused_and_named() -> None:
    p = Planner(grace=0, hold=300, node_cap=2, effect="None")
    p.observe({99: BAD}, 0)
    plan = p.plan(0, MAP, {})
    assert plan.changes == [] and [(r.reason, r.index, r.value) for r in plan.refused] == [
        ("unmapped", 99, "ecc_uncorrected")
    ]


def test_rate_limit_bounds_changes_a_minute_under_a_flapping_device() -> None:
    p = Planner(grace=0, hold=0, node_cap=16, effect="None")
    limit = RateLimit(per_minute=4)
    rules: dict = {}
    made: list[float] = []
    for step in range(600):  # a device flipping every second for ten minutes
        now = float(step)
        p.observe({0: BAD if step % 2 else GOOD}, now)
        for c in p.plan(now, MAP, rules).changes:
            if not limit.allow(now):
                continue
            made.append(now)
            if c.action == "create":
                rules[c.key] = rule(0)
            else:
                rules.pop(c.key)
    assert len(made) > 0
    for t in made:
        assert sum(1 for u in made if t <= u < t + 60) <= 4


def test_devices_that_leave_the_reports_are_forgotten() -> None:
    p = Planner(grace=0, hold=0, node_cap=2, effect="None")
    for step in range(100):  # hostile input: a thousand new device indexes in every report
        p.observe({step * 1000 + i: BAD for i in range(1000)}, float(step))
    assert len(p.tracks) == 1000
