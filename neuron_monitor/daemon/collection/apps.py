"""Which monitored applications each runtime scope has now, and which left with counts still to report.

An application that vanishes stays in its scope's ``gone`` until each of the scope's groups has run once more
(and reported its final counts), then `AppTracker.retire` drops it. One that comes back before that (a transient
listing gap) was never gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from neuron_monitor.daemon.config import Plan
from neuron_monitor.neuron.app import App


@dataclass
class ScopeApps:
    """The applications of one ``neuron_runtimes`` entry."""

    apps: dict[int, App] = field(default_factory=dict)  # present now, by pid, in snapshot order
    gone: dict[int, tuple[App, set[str]]] = field(default_factory=dict)  # pid -> (last App, groups still owed)
    pending_gone: dict[str, list[App]] = field(default_factory=dict)  # group -> departures it has not seen yet


class AppTracker:
    """Sorts each application snapshot into the plan's scopes (by tag) and tracks departures per group."""

    def __init__(self, plan: Plan) -> None:
        self.scopes: dict[int, ScopeApps] = {}
        self._plan = plan
        self._version: int | None = None  # the source's version last sorted; None: sort the next one
        self.apply(plan)

    def apply(self, plan: Plan) -> None:
        """Follow a (new) plan: scopes that stay keep their applications; groups no longer listed owe nothing."""
        old, self.scopes = self.scopes, {}
        for spec in plan.runtime_scopes:
            scope = old.get(spec.index) or ScopeApps()
            names = [name for name, _ in spec.groups]
            scope.pending_gone = {name: scope.pending_gone.get(name, []) for name in names}
            for _, owed in scope.gone.values():
                owed.intersection_update(names)
            self.scopes[spec.index] = scope
        self._plan = plan
        self._version = None  # the scopes may differ: sort the next snapshot again

    def update(self, snapshot: list[App], version: int) -> None:
        """Take a snapshot; one with the version last sorted is the same list, and is not sorted again."""
        if version == self._version:
            return
        self._version = version
        by_scope: dict[int, dict[int, App]] = {index: {} for index in self.scopes}
        for app in snapshot:
            spec = self._plan.scope_for_tag(app.tag)
            if spec is not None and spec.index in by_scope:
                by_scope[spec.index][app.pid] = app
        for index, scope in self.scopes.items():
            now_apps = by_scope[index]
            for pid, app in scope.apps.items():
                if pid not in now_apps:
                    scope.gone[pid] = (app, set(scope.pending_gone))
                    for departures in scope.pending_gone.values():
                        departures.append(app)
            for pid in now_apps:
                if pid in scope.gone:  # back again (a transient listing gap): not gone after all
                    del scope.gone[pid]
                    for departures in scope.pending_gone.values():
                        departures[:] = [a for a in departures if a.pid != pid]
            scope.apps = now_apps

    def take_gone(self, index: int, name: str) -> list[App]:
        """The departures group ``name`` of scope ``index`` has not been handed yet (handed now)."""
        scope = self.scopes[index]
        gone = scope.pending_gone.get(name, [])
        scope.pending_gone[name] = []
        return gone

    def reported(self, index: int, name: str, gone: list[App]) -> None:
        """Group ``name`` reported the final counts of ``gone``."""
        owed_by_pid = self.scopes[index].gone
        for app in gone:
            owed = owed_by_pid.get(app.pid)
            if owed is not None:
                owed[1].discard(name)

    def retire(self) -> list[tuple[int, int]]:
        """Forget departed applications whose final counts every group has reported: their (scope, pid)."""
        retired: list[tuple[int, int]] = []
        for index, scope in self.scopes.items():
            for pid in [p for p, (_, owed) in scope.gone.items() if not owed]:
                del scope.gone[pid]
                retired.append((index, pid))
        return retired
