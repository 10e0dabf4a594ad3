"""The Collector's parts on their own: AppTracker (versions, departures) and ReportAssembly (fresh, reuse)."""

from __future__ import annotations

from typing import Any

from neuron_monitor.app import App
from neuron_monitor.collection.apps import AppTracker
from neuron_monitor.collection.assembly import ReportAssembly
from neuron_monitor.config import plan_from_data

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
    body: dict[str, Any] = {"neuron_runtime_used_bytes": {"host": 1}}
    assembly.put_runtime(0, 1, "memory_used", body, 1.0)
    first = assembly.runtime[0][1]["memory_used"]
    assert first["fresh"] and first["neuron_runtime_used_bytes"] is body["neuron_runtime_used_bytes"]
    assembly.mark_stale()
    assert first["fresh"] is False
    assembly.put_runtime(0, 1, "memory_used", body, 1.0)  # the very same body object: encoded once, spliced
    second = assembly.runtime[0][1]["memory_used"]
    assert second["fresh"] and second["neuron_runtime_used_bytes"] is not body["neuron_runtime_used_bytes"]
    assembly.forget(0, 1)
    assert not assembly.runtime[0] and not assembly.reused
