"""The Collector's parts on their own: AppTracker (versions, departures) and ReportAssembly (fresh, reuse).
ReportAssembly against the assembly before it kept objects by unit: tests/collection/."""

from __future__ import annotations

from typing import Any

from neuron_monitor.daemon.collection.apps import AppTracker, ScopeApps
from neuron_monitor.daemon.collection.assembly import ReportAssembly
from neuron_monitor.daemon.config import plan_from_data
from neuron_monitor.neuron.app import App

TWO_GROUPS = {"neuron_runtimes": [{"metrics": [{"type": "execution_stats"}, {"type": "memory_used"}]}]}
ONE_GROUP = {"neuron_runtimes": [{"metrics": [{"type": "execution_stats"}]}]}


def test_a_snapshot_with_the_version_last_sorted_is_not_sorted_again() -> None:
    tracker = AppTracker(plan_from_data(TWO_GROUPS, "t.conf"))
    tracker.update([App(1, "train")], version=1)
    assert list(tracker.scopes[0].apps) == [1]
    tracker.update([], version=1)  # same version: the same list by contract, nothing came or went
    assert list(tracker.scopes[0].apps) == [1] and not tracker.scopes[0].gone
    tracker.update([], version=2)
    assert not tracker.scopes[0].apps and list(tracker.scopes[0].gone) == [1]


def test_a_departure_is_handed_to_each_group_once_and_retired_after_all_reported() -> None:
    tracker = AppTracker(plan_from_data(TWO_GROUPS, "t.conf"))
    tracker.update([App(1, "train"), App(2, "serve")], version=1)
    tracker.update([App(2, "serve")], version=2)
    gone = tracker.take_gone(0, "execution_stats")
    assert [a.pid for a in gone] == [1] and tracker.take_gone(0, "execution_stats") == []
    tracker.reported(0, "execution_stats", gone)
    assert tracker.retire() == []  # memory_used still owes its final object
    tracker.reported(0, "memory_used", tracker.take_gone(0, "memory_used"))
    assert tracker.retire() == [(0, 1)] and not tracker.scopes[0].gone


def test_a_group_removed_by_a_reload_no_longer_holds_a_departed_app() -> None:
    tracker = AppTracker(plan_from_data(TWO_GROUPS, "t.conf"))
    tracker.update([App(1, "train")], version=1)
    tracker.update([], version=2)
    tracker.reported(0, "execution_stats", tracker.take_gone(0, "execution_stats"))
    tracker.apply(plan_from_data(ONE_GROUP, "t.conf"))
    assert tracker.retire() == [(0, 1)]


def test_a_returning_app_was_never_gone() -> None:
    tracker = AppTracker(plan_from_data(TWO_GROUPS, "t.conf"))
    tracker.update([App(1, "train")], version=1)
    tracker.update([], version=2)
    tracker.update([App(1, "train")], version=3)
    assert list(tracker.scopes[0].apps) == [1] and not tracker.scopes[0].gone
    assert tracker.take_gone(0, "memory_used") == []


def test_objects_turn_stale_at_the_next_collection_and_a_body_returned_again_is_spliced() -> None:
    assembly = ReportAssembly()
    scope = ScopeApps(apps={1: App(1, "train")})
    body: dict[str, Any] = {"neuron_runtime_used_bytes": {"host": 1}}
    assembly.put_runtime_group(0, "memory_used", {1: body}, 1.0, scope)
    first = assembly.runtime[0]["memory_used"][1]
    assert first["fresh"] and first["neuron_runtime_used_bytes"] is body["neuron_runtime_used_bytes"]
    assembly.mark_stale()
    assert first["fresh"] is False
    assembly.put_runtime_group(0, "memory_used", {1: body}, 1.0, scope)  # the very same body: encoded, spliced
    second = assembly.runtime[0]["memory_used"][1]
    assert second["fresh"] and second["neuron_runtime_used_bytes"] is not body["neuron_runtime_used_bytes"]
    assembly.forget(0, 1)
    assert not assembly.runtime[0]["memory_used"] and not assembly.encoded[(0, "memory_used")]


def test_a_collection_marks_stale_only_what_it_does_not_replace() -> None:
    assembly = ReportAssembly()
    scope = ScopeApps(apps={1: App(1, "train"), 2: App(2, "serve")})
    assembly.put_system("memory_info", {"period": 1.0, "error": "", "fresh": True})
    assembly.put_runtime_group(0, "memory_used", {1: {"v": 1}, 2: {"v": 2}}, 1.0, scope)
    assembly.put_runtime_group(0, "execution_stats", {1: {"v": 1}, 2: {"v": 2}}, 1.0, scope)
    system = assembly.system["memory_info"]
    used = dict(assembly.runtime[0]["memory_used"])
    stats = dict(assembly.runtime[0]["execution_stats"])
    assembly.mark_stale({(None, "memory_info"), (0, "memory_used")})  # execution_stats is not due
    assert all(o["fresh"] is False for o in stats.values())
    assert system["fresh"] and all(o["fresh"] for o in used.values())  # replaced below, not marked
    assembly.put_runtime_group(0, "memory_used", {2: {"v": 3}}, 1.0, scope)  # 1 left out: its object carried
    assert used[1]["fresh"] is False and assembly.runtime[0]["memory_used"][1] is used[1]
    assert used[2]["fresh"] and assembly.runtime[0]["memory_used"][2]["v"] == 3
    report = assembly.build({0: scope}, {}, {}, {}, 1.0)
    fresh = {(e["pid"], n): o["fresh"] for e in report["neuron_runtime_data"] for n, o in e["report"].items()}
    assert fresh == {
        (1, "execution_stats"): False,
        (1, "memory_used"): False,
        (2, "execution_stats"): False,
        (2, "memory_used"): True,
    }
