"""Frozen: the report assembly before it kept its objects by unit (main at 4ca9e52), the reference that
tests/collection/test_assembly_equivalence.py holds the live one to. Not used by the daemon.

The newest object of every group, wrapped as AWS prints it, and the report assembled from them.

Objects collected for a report are ``fresh``; at the start of the next collection they are marked stale, so a
group whose period is longer than the report interval shows its newest data with ``fresh: false``.

A group may return the very same body object again while nothing in it changed (see groups/base.py); the
second time it comes back its values are encoded once (`report.encoded_values`) and those bytes are spliced
into every later report for as long as the same object is returned.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from neuron_monitor.daemon import report as rpt
from neuron_monitor.daemon.collection.apps import ScopeApps
from neuron_monitor.daemon.collection.groups import error_text
from neuron_monitor.daemon.config import Plan

_Key = tuple[int, int, str]  # (scope index, pid, group)


class ReportAssembly:
    """Group objects by place: ``system`` by group name, ``runtime`` by scope index, pid and group name."""

    def __init__(self) -> None:
        self.system: dict[str, dict[str, Any]] = {}
        self.runtime: dict[int, dict[int, dict[str, dict[str, Any]]]] = {}
        self.reused: dict[_Key, tuple[dict[str, Any], dict[str, Any] | None]] = {}  # body, its encoding
        self._fresh: list[dict[str, Any]] = []

    def apply(self, plan: Plan) -> None:
        """Drop the objects of groups and scopes a (new) plan no longer has."""
        system_names = {name for name, _ in plan.system_groups}
        for name in [n for n in self.system if n not in system_names]:
            del self.system[name]
        groups = {spec.index: {name for name, _ in spec.groups} for spec in plan.runtime_scopes}
        for index in [i for i in self.runtime if i not in groups]:
            del self.runtime[index]
        for index, by_pid in self.runtime.items():
            for objects in by_pid.values():
                for name in [n for n in objects if n not in groups[index]]:
                    del objects[name]
        for key in [k for k in self.reused if k[2] not in groups.get(k[0], ())]:
            del self.reused[key]

    def mark_stale(self) -> None:
        """A new collection starts: what the last one collected is carried over from now on."""
        for obj in self._fresh:
            obj["fresh"] = False
        self._fresh = []

    def put_system(self, name: str, obj: dict[str, Any]) -> None:
        self.system[name] = obj
        self._fresh.append(obj)

    def put_runtime(self, index: int, pid: int, name: str, body: dict[str, Any], period: float) -> None:
        obj = rpt.group_object(self._reusable((index, pid, name), body), period, body.get("error", ""), True)
        self.runtime.setdefault(index, {}).setdefault(pid, {})[name] = obj
        self._fresh.append(obj)

    def put_runtime_group(
        self, index: int, name: str, results: dict[int, dict[str, Any]], window: float, scope: ScopeApps
    ) -> None:
        """`put_runtime` for each body a runtime group returned whose application is in ``scope`` (present, or
        departed with counts still owed), with ``window`` as the period of a body that did not measure its own.
        One loop for the group's applications (16 on a trn2.48xlarge)."""
        by_pid = self.runtime.setdefault(index, {})
        present, gone, fresh = scope.apps, scope.gone, self._fresh
        for pid, body in results.items():
            if pid in present or pid in gone:
                values = self._reusable((index, pid, name), body)
                obj = rpt.group_object(values, body.get("period", window), body.get("error", ""), True)
                by_pid.setdefault(pid, {})[name] = obj
                fresh.append(obj)
        # "since the previous collection": a body the group left out this time is no longer one returned again
        kept = [pid for pid in results if pid in present or pid in gone]
        for key in [k for k in self.reused if k[0] == index and k[2] == name and k[1] not in kept]:
            del self.reused[key]

    def _reusable(self, key: _Key, body: dict[str, Any]) -> dict[str, Any]:
        """The body to wrap: the encoded values of a body returned unchanged (the same object) since the previous
        collection, the body itself otherwise. Encoding waits for the second sighting, so a body that changes
        every time costs nothing extra."""
        last = self.reused.get(key)
        if last is None or last[0] is not body:
            self.reused[key] = (body, None)
            return body
        encoded = last[1]
        if encoded is None:
            encoded = rpt.encoded_values(body)
            self.reused[key] = (body, encoded)
        return encoded

    def forget(self, index: int, pid: int) -> None:
        """A departed application was reported for the last time."""
        objects = self.runtime.get(index, {}).pop(pid, None)
        for name in objects or ():
            self.reused.pop((index, pid, name), None)

    def build(
        self,
        scopes: dict[int, ScopeApps],
        instance_info: dict[str, Any],
        hardware_info: dict[str, Any],
        extras: dict[str, Callable[[], dict[str, Any]]],
        wall: float | None = None,
    ) -> dict[str, Any]:
        """The report: each scope's present applications, then its departed ones still owed, then the rest."""
        entries: list[dict[str, Any]] = []
        for index, scope in scopes.items():
            by_pid = self.runtime.get(index, {})
            for pid, app in scope.apps.items():
                entries.append(rpt.runtime_entry(pid, app.tag, app.error, by_pid.get(pid, {})))
            for pid, (app, _) in scope.gone.items():
                if pid in by_pid:
                    entries.append(rpt.runtime_entry(pid, app.tag, app.error, by_pid[pid]))
        report = rpt.build_report(
            entries, self.system, instance_info, hardware_info, time.time() if wall is None else wall
        )
        for key, fn in extras.items():
            try:
                report[key] = fn()
            except Exception as e:
                report[key] = {"error": error_text(e)}
        return report
