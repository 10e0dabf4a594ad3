"""Scheduler and Collector with fake groups: counts once with mixed periods, departed apps, failures, slow writer."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from typing import Any

import orjson
import pytest

from neuron_monitor.daemon import report as rpt
from neuron_monitor.daemon import scheduler as sched_mod
from neuron_monitor.daemon.collection import groups as group_set_mod
from neuron_monitor.daemon.config import plan_from_data
from neuron_monitor.daemon.output import ReaderGone
from neuron_monitor.daemon.report import empty_hardware_info, empty_instance_info
from neuron_monitor.daemon.scheduler import Collector, Scheduler
from neuron_monitor.groups.base import RuntimeGroup, SystemGroup
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.app import App
from tests.scheduler_fakes import StepClock

TICKER = itertools.count(1)


class CountingSystemGroup(SystemGroup):
    """Each collection reports the events that happened since the previous one (a per-period counter)."""

    type_name = "vcpu_usage"
    events = 0  # bumped by the test's event source

    def __init__(self, root: RootFS) -> None:
        super().__init__(root)
        self.seen = 0

    def collect(self) -> dict[str, Any]:
        now = CountingSystemGroup.events
        delta, self.seen = now - self.seen, now
        return {"context_switch_count": delta}


class FailingSystemGroup(SystemGroup):
    type_name = "memory_info"

    def collect(self) -> dict[str, Any]:
        raise OSError("open /proc/meminfo: permission denied")


class CountingRuntimeGroup(RuntimeGroup):
    """Per-app counter deltas; final counts for departed apps."""

    type_name = "execution_stats"
    totals: dict[int, int] = {}  # noqa: RUF012 - shared with the test

    def __init__(self, root: RootFS) -> None:
        super().__init__(root)
        self.seen: dict[int, int] = {}

    def _delta(self, pid: int) -> int:
        now = CountingRuntimeGroup.totals.get(pid, 0)
        delta = now - self.seen.get(pid, 0)
        self.seen[pid] = now
        return delta

    def collect(self, apps: Sequence[App], gone: Sequence[App]) -> dict[int, dict[str, Any]]:
        out = {a.pid: {"execution_summary": {"completed": self._delta(a.pid)}} for a in apps}
        for a in gone:
            out[a.pid] = {"execution_summary": {"completed": self._delta(a.pid)}}
            self.seen.pop(a.pid, None)
        return out


class GaugeRuntimeGroup(RuntimeGroup):
    type_name = "memory_used"

    def collect(self, apps: Sequence[App], gone: Sequence[App]) -> dict[int, dict[str, Any]]:
        return {a.pid: {"neuron_runtime_used_bytes": {"host": a.pid * 10}} for a in apps}


class FakeApps:
    def __init__(self) -> None:
        self.apps: list[App] = []
        self.fail = False
        self.version = 0
        self.problem = ""

    def snapshot(self) -> list[App]:
        if self.fail:
            raise OSError("ioctl GET_ALL_APPS_INFO failed: EIO")
        self.version += 1  # every snapshot may differ: the scheduler sorts each one
        return list(self.apps)

    def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def fake_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    system = {"vcpu_usage": CountingSystemGroup, "memory_info": FailingSystemGroup}
    runtime = {"execution_stats": CountingRuntimeGroup, "memory_used": GaugeRuntimeGroup}
    monkeypatch.setattr(group_set_mod, "load_system_group", lambda name: system[name])
    monkeypatch.setattr(group_set_mod, "load_runtime_group", lambda name: runtime[name])
    CountingSystemGroup.events = 0
    CountingRuntimeGroup.totals = {}


def make_collector(conf: dict[str, Any], apps: FakeApps, clock: Any = None) -> Collector:
    kwargs = {"clock": clock} if clock else {}
    return Collector(
        RootFS("/nonexistent"),
        plan_from_data(conf, "test.conf"),
        apps,
        lambda: empty_hardware_info("no Neuron devices found"),
        lambda: empty_instance_info("off EC2"),
        **kwargs,
    )


async def run_ticks(c: Collector, clock: StepClock, steps: int, dt: float, between: Any = None) -> list[dict]:
    """Advance the clock in steps of dt; at each step collect whatever is due, like the scheduler does."""
    from concurrent.futures import ThreadPoolExecutor

    reports = []
    with ThreadPoolExecutor(2) as ex:
        for i in range(steps):
            clock.t += dt
            if between:
                between(i)
            due = c.due_units(clock.t)
            if not due:
                continue
            await c.collect(due, ex)
            reports.append(orjson.loads(orjson.dumps(c.build_report())))
            c.retire_gone()
            for u in due:
                u.next_due += u.period
    return reports


CONF_MIXED = {
    "neuron_runtimes": [
        {"metrics": [{"type": "execution_stats", "period": "3s"}, {"type": "memory_used", "period": "1s"}]}
    ],
    "system_metrics": [{"type": "vcpu_usage", "period": "2s"}, {"type": "memory_info", "period": "1s"}],
}


async def test_counts_reported_once_with_mixed_periods() -> None:
    apps = FakeApps()
    apps.apps = [App(101, "train"), App(102, "serve")]
    clock = StepClock()
    c = make_collector(CONF_MIXED, apps, clock)

    def events(i: int) -> None:
        CountingSystemGroup.events += 7
        for pid in (101, 102):
            CountingRuntimeGroup.totals[pid] = CountingRuntimeGroup.totals.get(pid, 0) + pid % 10

    reports = await run_ticks(c, clock, 12, 1.0, events)
    assert len(reports) == 12  # memory_info at 1 s makes every second a report
    # a group appears once it has been collected; until then it is absent rather than invented
    assert "vcpu_usage" not in reports[0]["system_data"]
    vcpu = [r["system_data"]["vcpu_usage"] for r in reports[1:]]
    assert [o["fresh"] for o in vcpu] == [True, False] * 5 + [True]
    assert vcpu[0] == vcpu[1] | {"fresh": True}  # the carried-over object is the newest data
    sys_fresh = [o for o in vcpu if o["fresh"]]
    assert all(o["period"] == pytest.approx(2.0) for o in sys_fresh)
    assert sum(o["context_switch_count"] for o in sys_fresh) == CountingSystemGroup.events == 84
    for pid in (101, 102):
        fresh = [
            e["report"]["execution_stats"]
            for r in reports
            for e in r["neuron_runtime_data"]
            if e["pid"] == pid and "execution_stats" in e["report"] and e["report"]["execution_stats"]["fresh"]
        ]
        assert len(fresh) == 4
        assert sum(o["execution_summary"]["completed"] for o in fresh) == CountingRuntimeGroup.totals[pid]
        assert all(o["period"] == pytest.approx(3.0) for o in fresh)


async def test_failing_group_fills_its_error_only() -> None:
    apps = FakeApps()
    clock = StepClock()
    c = make_collector(CONF_MIXED, apps, clock)
    reports = await run_ticks(c, clock, 2, 1.0)
    mem = reports[-1]["system_data"]["memory_info"]
    assert mem["error"] == "open /proc/meminfo: permission denied"
    assert mem["period"] == pytest.approx(1.0)
    assert reports[-1]["system_data"]["vcpu_usage"]["error"] == ""
    assert reports[-1]["neuron_hardware_info"]["error"] == "no Neuron devices found"
    assert reports[-1]["instance_info"]["error"] == "off EC2"


async def test_departed_app_final_counts_once_then_gone() -> None:
    apps = FakeApps()
    apps.apps = [App(101, "train"), App(202, "short")]
    clock = StepClock()
    c = make_collector(CONF_MIXED, apps, clock)

    def events(i: int) -> None:
        if i <= 4:  # app 202 works until it exits between the 5th and 6th second
            CountingRuntimeGroup.totals[202] = CountingRuntimeGroup.totals.get(202, 0) + 5
        if i == 4:
            apps.apps = [App(101, "train")]

    reports = await run_ticks(c, clock, 9, 1.0, events)
    seen = [[e for e in r["neuron_runtime_data"] if e["pid"] == 202] for r in reports]
    present = [i for i, s in enumerate(seen) if s]
    # it vanished at t=5; execution_stats (3 s) runs next at t=6: the final counts come then, and 202 leaves after
    assert present == [0, 1, 2, 3, 4, 5]
    fresh_counts = [
        s[0]["report"]["execution_stats"]["execution_summary"]["completed"]
        for s in seen
        if s and "execution_stats" in s[0]["report"] and s[0]["report"]["execution_stats"]["fresh"]
    ]
    assert fresh_counts == [15, 10]  # t=3: three seconds of work; t=6: the two seconds before it exited
    assert sum(fresh_counts) == CountingRuntimeGroup.totals[202] == 25
    # the gauge group stops reporting a departed app: its last object is carried, not fresh
    assert seen[5][0]["report"]["memory_used"]["fresh"] is False


async def test_tag_filter_selects_apps_first_match_wins() -> None:
    apps = FakeApps()
    apps.apps = [App(1, "train-a"), App(2, "serve-b"), App(3, "other")]
    conf = {
        "neuron_runtimes": [
            {"tag_filter": "^train", "metrics": [{"type": "memory_used", "period": "1s"}]},
            {"tag_filter": "serve|train", "metrics": [{"type": "execution_stats", "period": "1s"}]},
        ]
    }
    clock = StepClock()
    c = make_collector(conf, apps, clock)
    reports = await run_ticks(c, clock, 1, 1.0)
    entries = {e["pid"]: e for e in reports[0]["neuron_runtime_data"]}
    assert set(entries) == {1, 2}
    assert set(entries[1]["report"]) == {"memory_used"}
    assert set(entries[2]["report"]) == {"execution_stats"}
    assert entries[1]["neuron_runtime_tag"] == "train-a"


async def test_app_listing_failure_fills_runtime_group_errors() -> None:
    apps = FakeApps()
    apps.apps = [App(1, "a")]
    clock = StepClock()
    c = make_collector(CONF_MIXED, apps, clock)
    await run_ticks(c, clock, 1, 1.0)
    apps.fail = True
    reports = await run_ticks(c, clock, 1, 1.0)
    obj = reports[0]["neuron_runtime_data"][0]["report"]["memory_used"]
    assert obj["error"].startswith("listing Neuron applications failed: ioctl GET_ALL_APPS_INFO failed")
    assert obj["fresh"] is True
    assert reports[0]["system_data"]["memory_info"]["fresh"] is True


async def test_reload_keeps_baselines_of_groups_that_stay() -> None:
    apps = FakeApps()
    apps.apps = [App(7, "a")]
    clock = StepClock()
    c = make_collector(CONF_MIXED, apps, clock)

    def events(i: int) -> None:
        CountingRuntimeGroup.totals[7] = CountingRuntimeGroup.totals.get(7, 0) + 1

    r1 = await run_ticks(c, clock, 4, 1.0, events)
    faster = {
        "neuron_runtimes": [{"metrics": [{"type": "execution_stats", "period": "1s"}]}],
        "system_metrics": [{"type": "vcpu_usage", "period": "1s"}],
    }
    c.apply_plan(plan_from_data(faster, "test.conf"))
    r2 = await run_ticks(c, clock, 3, 1.0, events)
    total = 0
    for r in r1 + r2:
        for e in r["neuron_runtime_data"]:
            o = e["report"].get("execution_stats")
            if o and o["fresh"]:
                total += o["execution_summary"]["completed"]
    assert total == CountingRuntimeGroup.totals[7] == 7
    assert "memory_info" not in r2[-1]["system_data"]
    assert "memory_used" not in r2[-1]["neuron_runtime_data"][0]["report"]


async def test_slow_writer_skips_slots_and_loses_no_counts() -> None:
    """A writer slower than the period: nothing buffered beyond one line, every count arrives, periods widen."""
    apps = FakeApps()
    c = make_collector({"system_metrics": [{"type": "vcpu_usage", "period": "20ms"}]}, apps)
    lines: list[bytes] = []
    stop = asyncio.Event()
    in_flight = 0
    max_in_flight = 0

    async def slow_write(line: bytes) -> None:
        nonlocal in_flight, max_in_flight
        in_flight += 1
        max_in_flight = max(max_in_flight, in_flight)
        CountingSystemGroup.events += 3  # events keep happening while the reader is slow
        await asyncio.sleep(0.1)
        lines.append(line)
        in_flight -= 1
        if len(lines) == 6:
            stop.set()

    s = Scheduler(c, slow_write)
    await asyncio.wait_for(s.run(stop), timeout=30)
    s.close()
    objs = [orjson.loads(line)["system_data"]["vcpu_usage"] for line in lines]
    assert max_in_flight == 1
    assert s.skipped_slots > 0
    assert all(o["fresh"] for o in objs)
    assert sum(o["context_switch_count"] for o in objs) == CountingSystemGroup.events - 3  # last bump after collection
    assert max(o["period"] for o in objs[1:]) > 0.05  # the gap is in the period, not lost


async def test_config_without_groups_still_reports() -> None:
    clock = StepClock()
    c = make_collector({"period": "1s", "system_metrics": [], "neuron_runtimes": []}, FakeApps(), clock)
    reports = await run_ticks(c, clock, 3, 1.0)
    assert len(reports) == 3
    assert reports[0]["system_data"] == {}
    assert reports[0]["neuron_runtime_data"] == []
    assert set(reports[0]) >= {"instance_info", "neuron_hardware_info", "report_time"}


async def test_no_drift_over_a_simulated_hour() -> None:
    """1 s for an hour: 3600 +/- 1 reports although every sleep oversleeps and every tick takes time."""
    import random

    rng = random.Random(7)
    clock = StepClock()
    c = make_collector({"system_metrics": [{"type": "vcpu_usage", "period": "1s"}]}, FakeApps(), clock)
    stop = asyncio.Event()
    start = clock.t
    lines = 0

    async def oversleeping(delay: float) -> None:
        clock.t += delay + rng.uniform(0.0, 0.02)  # timers fire late, never early

    async def write(line: bytes) -> None:
        nonlocal lines
        lines += 1
        clock.t += rng.uniform(0.0, 0.3)  # collection and writing take time
        if clock.t - start >= 3600.0:
            stop.set()

    s = Scheduler(c, write, clock=clock, sleep=oversleeping)
    await s.run(stop)
    s.close()
    assert abs(lines - 3600) <= 1
    assert s.skipped_slots == 0


async def test_partial_failure_keeps_data_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    class PartialGroup(SystemGroup):
        type_name = "vcpu_usage"

        def collect(self) -> dict[str, Any]:
            return {"context_switch_count": 3, "error": "stats/hardware/mem_ecc_corrected: no such file"}

    monkeypatch.setattr(group_set_mod, "load_system_group", lambda name: PartialGroup)
    clock = StepClock()
    c = make_collector({"system_metrics": [{"type": "vcpu_usage", "period": "1s"}]}, FakeApps(), clock)
    obj = (await run_ticks(c, clock, 1, 1.0))[0]["system_data"]["vcpu_usage"]
    assert obj["context_switch_count"] == 3
    assert obj["error"] == "stats/hardware/mem_ecc_corrected: no such file"


async def test_collections_run_on_the_loop_until_several_in_a_row_are_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Quick collections stay on the event loop's thread. A slow first collection (start-up) and a single slow one
    (preempted) do not count; after LOOP_STRIKES slow ones in a row (a device read that blocks) every later
    collection runs in a worker thread, so the loop keeps serving signals meanwhile."""
    import threading
    import time

    threads: list[str] = []
    slow: list[bool] = []

    class WhereGroup(SystemGroup):
        type_name = "vcpu_usage"

        def collect(self) -> dict[str, Any]:
            threads.append(threading.current_thread().name)
            if slow and slow.pop(0):
                time.sleep(sched_mod.LOOP_BUDGET * 1.5)
            return {"context_switch_count": 0}

    monkeypatch.setattr(group_set_mod, "load_system_group", lambda name: WhereGroup)
    clock = StepClock()
    c = make_collector({"system_metrics": [{"type": "vcpu_usage", "period": "1s"}]}, FakeApps(), clock)
    loop_thread = threading.current_thread().name
    strikes = sched_mod.LOOP_STRIKES
    slow += [True, False, True, False]  # the first collection, then one slow one alone
    await run_ticks(c, clock, 4, 1.0)
    assert set(threads) == {loop_thread} and c.on_loop
    slow += [True] * strikes
    await run_ticks(c, clock, strikes + 2, 1.0)
    assert not c.on_loop
    assert set(threads[: 4 + strikes]) == {loop_thread}  # the slow ones themselves ran on the loop ...
    assert len(threads) == 6 + strikes and loop_thread not in threads[4 + strikes :]  # ... the later ones did not


class ReusingRuntimeGroup(RuntimeGroup):
    """Returns the same body object while its app's gauge stays, as memory_used does (never mutating it)."""

    type_name = "memory_used"
    gauges: dict[int, int] = {}  # noqa: RUF012 - shared with the test

    def __init__(self, root: RootFS) -> None:
        super().__init__(root)
        self.bodies: dict[int, dict[str, Any]] = {}

    def collect(self, apps: Sequence[App], gone: Sequence[App]) -> dict[int, dict[str, Any]]:
        for a in apps:
            gauge = ReusingRuntimeGroup.gauges[a.pid]
            body = self.bodies.get(a.pid)
            if body is None or body["neuron_runtime_used_bytes"]["host"] != gauge:
                self.bodies[a.pid] = {
                    "neuron_runtime_used_bytes": {"host": gauge, "neuron_device": 2 * gauge},
                    "loaded_models": [{"name": f"m{gauge}", "subgraphs": {"sg_00": {"neuroncore_index": 0}}}],
                }
        return {a.pid: self.bodies[a.pid] for a in apps}


async def test_a_body_returned_unchanged_is_encoded_once_and_reported_as_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(group_set_mod, "load_runtime_group", lambda name: ReusingRuntimeGroup)
    encoded: list[dict[str, Any]] = []
    real = rpt.encoded_values
    monkeypatch.setattr(rpt, "encoded_values", lambda body: encoded.append(body) or real(body))
    apps = FakeApps()
    apps.apps = [App(101, "train"), App(102, "serve")]
    ReusingRuntimeGroup.gauges = {101: 10, 102: 20}
    clock = StepClock()
    c = make_collector({"neuron_runtimes": [{"metrics": [{"type": "memory_used", "period": "1s"}]}]}, apps, clock)

    def move(i: int) -> None:
        if i == 3:
            ReusingRuntimeGroup.gauges[101] = 11  # a new body for 101; 102's stays

    reports = await run_ticks(c, clock, 6, 1.0, move)
    used = {
        pid: [e["report"]["memory_used"] for r in reports for e in r["neuron_runtime_data"] if e["pid"] == pid]
        for pid in (101, 102)
    }
    assert [o["neuron_runtime_used_bytes"]["host"] for o in used[101]] == [10, 10, 10, 11, 11, 11]
    assert [o["loaded_models"][0]["name"] for o in used[101]] == ["m10"] * 3 + ["m11"] * 3
    assert all(o == used[102][0] for o in used[102]) and used[102][0]["neuron_runtime_used_bytes"]["host"] == 20
    for objs in used.values():  # the usual group object around the spliced values, key order included
        assert all(list(o) == ["period", "neuron_runtime_used_bytes", "loaded_models", "error", "fresh"] for o in objs)
        assert all(o["period"] == pytest.approx(1.0) and o["fresh"] for o in objs)
    # encoded on the second sighting of each body object, then reused: 101 twice (two bodies), 102 once
    assert sorted(b["neuron_runtime_used_bytes"]["host"] for b in encoded) == [10, 11, 20]
    # a departed app takes its encoded body with it
    apps.apps = [App(102, "serve")]
    await run_ticks(c, clock, 2, 1.0)
    assert {pid for encoded in c.assembly.encoded.values() for pid in encoded} == {102}


def _shape(value: Any) -> Any:
    """A decoded report with every number replaced by its type: what two reports share when made the same way."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return type(value).__name__


async def test_reports_the_timer_makes_match_those_run_makes_and_every_count_arrives_once() -> None:
    """The timer's own reports (`write_now` took the line) and those `run` finishes (it declined): the same keys
    in the same order, the same types, and together every event counted exactly once."""
    apps = FakeApps()
    apps.apps = [App(7, "train")]
    conf = {
        "system_metrics": [{"type": "vcpu_usage", "period": "20ms"}],
        "neuron_runtimes": [{"metrics": [{"type": "execution_stats", "period": "20ms"}]}],
    }
    c = make_collector(conf, apps)
    stop = asyncio.Event()
    lines: list[tuple[str, bytes]] = []
    calls = itertools.count()

    def record(path: str, line: bytes) -> None:
        CountingSystemGroup.events += 2
        CountingRuntimeGroup.totals[7] = CountingRuntimeGroup.totals.get(7, 0) + 5
        lines.append((path, line))
        if len(lines) == 12:
            stop.set()

    def write_now(line: bytes) -> bool:
        if next(calls) % 3 == 2:  # the reader is not ready for every third line
            return False
        record("timer", line)
        return True

    async def write(line: bytes) -> None:
        await asyncio.sleep(0.005)
        record("run", line)

    s = Scheduler(c, write, write_now=write_now)
    await asyncio.wait_for(s.run(stop), timeout=30)
    s.close()
    reports = [(path, orjson.loads(line)) for path, line in lines]
    assert {path for path, _ in reports} == {"timer", "run"}
    shapes = {orjson.dumps(_shape(r)) for _, r in reports}
    assert len(shapes) == 1
    assert s.reports == len(lines)
    switches = sum(r["system_data"]["vcpu_usage"]["context_switch_count"] for _, r in reports)
    completed = sum(r["neuron_runtime_data"][0]["report"]["execution_stats"]["execution_summary"]["completed"]
                    for _, r in reports)  # fmt: skip
    assert switches == CountingSystemGroup.events - 2  # the last bump came after the last collection
    assert completed == CountingRuntimeGroup.totals[7] - 5


async def test_a_failure_in_the_timers_report_ends_run_as_one_in_runs_own_would() -> None:
    c = make_collector({"system_metrics": [{"type": "vcpu_usage", "period": "20ms"}]}, FakeApps())

    def write_now(line: bytes) -> bool:
        raise ReaderGone()

    async def write(line: bytes) -> None:
        raise AssertionError("not reached")

    s = Scheduler(c, write, write_now=write_now)
    with pytest.raises(ReaderGone):
        await asyncio.wait_for(s.run(asyncio.Event()), timeout=30)
    s.close()


async def test_the_reports_own_objects_share_the_collections_kept_listing(tmp_path: Any) -> None:
    """A top-level object that lists a directory with a max age (as the ``neuron_monitor`` object's required
    families list the devices, check/required.py) is read as a collection reads: reports built within the max age
    share one listing, and a report after it lists again."""
    (tmp_path / "devices").mkdir()
    listed: list[str] = []

    class CountingRoot(RootFS):
        def _list(self, rel: str) -> list[str]:
            listed.append(rel)
            return super()._list(rel)

    clock = StepClock()
    c = Collector(
        CountingRoot(tmp_path),
        plan_from_data({"period": "100ms", "system_metrics": [{"type": "vcpu_usage"}]}, "test.conf"),
        FakeApps(),
        lambda: empty_hardware_info("no Neuron devices found"),
        lambda: empty_instance_info("off EC2"),
        clock=clock,
    )
    c.add_extra("listing", lambda: {"names": c.root.listdir("devices", 1.0)})
    reports = await run_ticks(c, clock, 5, 0.1)
    assert len(reports) == 5 and listed == ["devices"]
    clock.t += 1.0
    reports = await run_ticks(c, clock, 1, 0.1)
    assert len(reports) == 1 and listed == ["devices", "devices"]
