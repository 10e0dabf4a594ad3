"""The metric-group instances a plan asks for: built, kept across reloads (with their baselines), primed, closed.

A group whose module fails to load is replaced by a stand-in that reports why in its ``error`` on every
collection, so one broken group never stops the others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from neuron_monitor.daemon.config import Plan
from neuron_monitor.groups.base import RuntimeGroup, SystemGroup
from neuron_monitor.groups.registry import load_runtime_group, load_system_group
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.app import App

log = logging.getLogger("neuron_monitor.daemon.scheduler")

_G = TypeVar("_G", SystemGroup, RuntimeGroup)


def error_text(e: BaseException) -> str:
    """An exception as a group's one-line ``error``."""
    text = str(e) or type(e).__name__
    return text.replace("\n", " ")


class _UnavailableSystemGroup(SystemGroup):
    """Stands in for a group whose module failed to load: every collection reports why."""

    def __init__(self, root: RootFS, why: str) -> None:
        super().__init__(root)
        self.why = why

    def collect(self) -> dict[str, Any]:
        raise RuntimeError(self.why)


class _UnavailableRuntimeGroup(RuntimeGroup):
    """The runtime-group counterpart: every application's object carries the reason."""

    def __init__(self, root: RootFS, why: str) -> None:
        super().__init__(root)
        self.why = why

    def collect(self, apps: Sequence[App], gone: Sequence[App]) -> dict[int, dict[str, Any]]:
        return {app.pid: {"error": self.why} for app in apps}


def _make_group(
    name: str,
    root: RootFS,
    load: Callable[[str], type[_G]],
    fallback: Callable[[RootFS, str], _G],
    options: Mapping[str, Any],
) -> _G:
    """Instantiate a registered group with the plan's keyword ``options`` for it; a group that fails to load fills
    its own error instead of stopping us."""
    try:
        return load(name)(root, **options)
    except Exception as e:
        log.error("metric group %s is unavailable: %s", name, e)
        group = fallback(root, f"metric group unavailable: {error_text(e)}")
        group.type_name = name  # type: ignore[misc]  # the stand-in takes the missing group's name
        return group


def prime(group: SystemGroup) -> None:
    """Take a group's baseline; a failure shows up as its first collection's error instead."""
    try:
        group.prime()
    except Exception as e:
        log.info("priming %s failed: %s", group.type_name, e)


class GroupSet:
    """The system groups by name and each runtime scope's groups (scope index -> name -> group)."""

    def __init__(self, root: RootFS) -> None:
        self.root = root
        self.system: dict[str, SystemGroup] = {}
        self.runtime: dict[int, dict[str, RuntimeGroup]] = {}
        self.primed = False

    def apply(self, plan: Plan) -> None:
        """Build the groups of ``plan``; a group that stays (same name, same scope) is kept with its state."""
        old_system, self.system = self.system, {}
        for name, _ in plan.system_groups:
            kept = old_system.pop(name, None)
            if kept is None:
                kept = _make_group(name, self.root, load_system_group, _UnavailableSystemGroup, plan.options_of(name))
                if self.primed:  # added by a reload: baseline now, so its first report has data
                    prime(kept)
            self.system[name] = kept
        for group in old_system.values():
            group.close()
        old_runtime, self.runtime = self.runtime, {}
        for spec in plan.runtime_scopes:
            old = old_runtime.pop(spec.index, {})
            groups: dict[str, RuntimeGroup] = {}
            for name, _ in spec.groups:
                kept_runtime = old.pop(name) if name in old else None
                groups[name] = kept_runtime or _make_group(
                    name, self.root, load_runtime_group, _UnavailableRuntimeGroup, plan.options_of(name)
                )
            self.runtime[spec.index] = groups
            for runtime_group in old.values():
                runtime_group.close()
        for groups in old_runtime.values():
            for runtime_group in groups.values():
                runtime_group.close()

    def prime(self) -> None:
        for group in self.system.values():
            prime(group)
        self.primed = True

    def close(self) -> None:
        for group in self.system.values():
            group.close()
        for groups in self.runtime.values():
            for runtime_group in groups.values():
                runtime_group.close()
