"""The newest object of every group, wrapped as AWS prints it, and the report assembled from them.

Objects collected for a report are ``fresh``; once a later collection no longer replaces them they are marked
stale, so a group whose period is longer than the report interval shows its newest data with ``fresh: false``.
The objects are kept by unit (a system group; a runtime scope's group, its objects by pid), and a collection
touches only what changes: `mark_stale` marks the objects of the units that are not due, and a due runtime unit
marks, as it files its new objects, only the old ones it did not replace (an application its group left out).

A group may return the very same body object again while nothing in it changed (see groups/base.py); the
second time it comes back its values are encoded once (`report.encoded_values`) and those bytes are spliced
into every later report for as long as the same object is returned.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from typing import Any

from neuron_monitor.daemon import report as rpt
from neuron_monitor.daemon.collection.apps import ScopeApps
from neuron_monitor.daemon.collection.groups import error_text
from neuron_monitor.daemon.config import Plan

UnitKey = tuple[int | None, str]  # (scope index, group name); scope None: a system group
_Object = dict[str, Any]


class ReportAssembly:
    """Group objects by place: ``system`` by group name, ``runtime`` by scope index, group name and pid."""

    def __init__(self) -> None:
        self.system: dict[str, _Object] = {}
        self.runtime: dict[int, dict[str, dict[int, _Object]]] = {}
        self.filed: dict[tuple[int, str], dict[int, dict[str, Any]]] = {}  # unit -> pid -> body filed last
        self.encoded: dict[tuple[int, str], dict[int, tuple[dict[str, Any], dict[str, Any]]]] = {}  # body, values
        self._fresh: dict[UnitKey, Iterable[_Object]] = {}  # unit -> the objects it made fresh last

    def apply(self, plan: Plan) -> None:
        """Drop the objects of groups and scopes a (new) plan no longer has."""
        system_names = {name for name, _ in plan.system_groups}
        for name in [n for n in self.system if n not in system_names]:
            del self.system[name]
        groups = {spec.index: {name for name, _ in spec.groups} for spec in plan.runtime_scopes}
        for index in [i for i in self.runtime if i not in groups]:
            del self.runtime[index]
        for index, by_name in self.runtime.items():
            for name in [n for n in by_name if n not in groups[index]]:
                del by_name[name]
        for per_unit in (self.filed, self.encoded):
            for key in [k for k in per_unit if k[1] not in groups.get(k[0], ())]:
                del per_unit[key]
        for unit in list(self._fresh):
            scope = unit[0]
            if unit[1] not in (system_names if scope is None else groups.get(scope, ())):
                del self._fresh[unit]

    def mark_stale(self, due: AbstractSet[UnitKey] = frozenset()) -> None:
        """A new collection of the units ``due`` starts: the objects the other units made fresh are carried over
        from now on. A due unit replaces its objects as it files new ones (`put_system`, `put_runtime_group`),
        which marks any it does not replace; with no ``due``, every object is marked now."""
        fresh = self._fresh
        if fresh.keys() <= due:  # every unit is due (reports at the groups' period)
            return
        for unit in [u for u in fresh if u not in due]:
            for obj in fresh.pop(unit):
                obj["fresh"] = False

    def put_system(self, name: str, obj: _Object) -> None:
        self.system[name] = obj
        self._fresh[(None, name)] = (obj,)

    def put_runtime_group(
        self, index: int, name: str, results: dict[int, dict[str, Any]], window: float, scope: ScopeApps
    ) -> None:
        """File the bodies a runtime group returned whose application is in ``scope`` (present, or departed with
        counts still owed), each as a fresh group object with ``window`` as the period of a body that did not
        measure its own. The unit's objects of applications the group left out stay, carried over (stale)."""
        unit = (index, name)
        present, gone = scope.apps, scope.gone
        if not (results.keys() <= present.keys() or all(pid in present or pid in gone for pid in results)):
            results = {pid: body for pid, body in results.items() if pid in present or pid in gone}
        last = self.filed.get(unit)
        objects: dict[int, _Object] = {}
        wrap = rpt.fresh_group_object
        if last is None:
            for pid, body in results.items():
                objects[pid] = wrap(body, window)
        else:
            for pid, body in results.items():
                objects[pid] = wrap(self._reused(unit, pid, body) if last.get(pid) is body else body, window)
        by_name = self.runtime.setdefault(index, {})
        old = by_name.get(name)
        if old is not None and not old.keys() <= objects.keys():  # applications the group left out this time
            for pid in old.keys() - objects.keys():
                obj = objects[pid] = old[pid]
                obj["fresh"] = False
        by_name[name] = objects
        self.filed[unit] = dict(results)
        self._fresh[unit] = objects.values()

    def _reused(self, unit: tuple[int, str], pid: int, body: dict[str, Any]) -> dict[str, Any]:
        """The encoded values of a body returned again (the same object as last time): encoded at its second
        sighting, then reused while it comes back. A body that changes every time costs nothing extra."""
        encoded = self.encoded.setdefault(unit, {})
        kept = encoded.get(pid)
        if kept is None or kept[0] is not body:
            kept = encoded[pid] = (body, rpt.encoded_values(body))
        return kept[1]

    def forget(self, index: int, pid: int) -> None:
        """A departed application was reported for the last time."""
        for name, objects in self.runtime.get(index, {}).items():
            objects.pop(pid, None)
            for per_unit in (self.filed, self.encoded):
                kept = per_unit.get((index, name))
                if kept is not None:
                    kept.pop(pid, None)

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
            by_name = self.runtime.get(index, {})
            units = [(name, by_name[name]) for name in sorted(by_name)]
            for pid, app in scope.apps.items():
                groups = {name: obj for name, objects in units if (obj := objects.get(pid)) is not None}
                entries.append(rpt.runtime_entry_in_order(pid, app.tag, app.error, groups))
            for pid, (app, _) in scope.gone.items():
                groups = {name: obj for name, objects in units if (obj := objects.get(pid)) is not None}
                if groups:
                    entries.append(rpt.runtime_entry_in_order(pid, app.tag, app.error, groups))
        report = rpt.build_report(
            entries, self.system, instance_info, hardware_info, time.time() if wall is None else wall
        )
        for key, fn in extras.items():
            try:
                report[key] = fn()
            except Exception as e:
                report[key] = {"error": error_text(e)}
        return report
