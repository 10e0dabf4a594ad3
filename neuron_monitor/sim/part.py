"""A group's simulator part: the contract, and how the simulator finds the parts.

A metric group that reads something the simulator must imitate has a ``sim.py`` in its folder
(``neuron_monitor/groups/<name>/sim.py``) that defines ``PART``, a subclass of `SimPart`. The folder is the
registration, as for ``spec.py``: the simulator imports every group's ``sim.py`` it finds (`parts`), and nothing
outside the folder names the group. A part:

- lays out the group's files of one device (`SimPart.device_nodes`, a class method: the static tree that tests
  build with `DeviceTree` uses it too) in the driver layout the simulator imitates (`Host.layout`: a version, or a
  reorganized layout's name; see sim/layouts.py), below the device's directories the base tree made
  (`DeviceTree.top`, ``stats``, ``core_stats``);
- is made once per simulated host (``PART(host)``), after the device trees: it creates its host-wide files there
  and keeps its state (counts, faults in effect);
- steps on the simulator's clock: `begin` once the workload is planned (before any runtime starts), `step` every
  animation step, `write` at the sysfs interval; `device_changed` when a device's runtimes or their memory changed;
- answers the fault commands it names in ``commands`` (`apply`, by kind; the simulator's command dispatch is a
  lookup over the parts' names), and the device events every part hears (`device_reset`, `device_removed`,
  `remove_nodes` of the families it names in ``node_families``);
- gives its share of the ground truth's ``totals`` event (`totals`), and closes its files (`close`).

The simulator itself (sim/animator.py) keeps the workload (runtimes, their data blocks and ioctl answers), the
clock, the ground truth and the control file; a part sees it through `Host`.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from neuron_monitor import groups
from neuron_monitor.sim.layouts import DriverLayout
from neuron_monitor.sim.shapes import Shape

if TYPE_CHECKING:
    from neuron_monitor.sim.runtime import Runtime
    from neuron_monitor.sim.tree import DeviceTree, TreeBuilder


class Host(Protocol):
    """What a part sees of the simulator (sim/animator.py `Simulator`)."""

    @property
    def root(self) -> Path: ...
    @property
    def shape(self) -> Shape: ...
    @property
    def layout(self) -> DriverLayout: ...
    @property
    def options(self) -> Mapping[str, Any]: ...
    @property
    def rng(self) -> random.Random:
        """The workload's random numbers (same seed, same draws: draw in the order the part always has)."""

    @property
    def builder(self) -> TreeBuilder: ...
    @property
    def devices(self) -> Sequence[DeviceTree]: ...
    @property
    def removed_devices(self) -> set[int]: ...
    @property
    def runtimes(self) -> Sequence[Runtime]: ...
    @property
    def live_counters(self) -> bool:
        """Driver >= 2.30: the per-core counters count as the workload runs (before: at its exit)."""

    @property
    def driver_counts(self) -> Mapping[tuple[int, int, str], int]:
        """What the driver counted per core: (device, core, sysfs counter name) -> count."""

    def add_driver_count(self, device: int, core: int, name: str, amount: int) -> None: ...
    def owners(self, device: int) -> list[Runtime]:
        """The runtimes attached to ``device`` now."""

    def busy_share(self, now: float) -> dict[int, float]:
        """Neuron device -> the busy share of its physical cores now."""

    def wall_clock(self) -> float:
        """The simulator's wall-clock time (epoch seconds): what a driver stamps on its files."""


class DeviceNodes(Protocol):
    """A part's files of one device (the object `SimPart.device_nodes` returns)."""

    def close(self) -> None: ...


class SimPart:
    """One group's share of the simulated host; every hook does nothing until a part overrides it."""

    # the fault commands this part answers (`apply`), by kind
    commands: ClassVar[tuple[str, ...]] = ()
    # the node families a tree may be built without (option ``absent_nodes``) or lose (command ``remove_nodes``)
    node_families: ClassVar[tuple[str, ...]] = ()

    def __init__(self, name: str, host: Host) -> None:
        self.name = name
        self.host = host

    @classmethod
    def device_nodes(cls, device: DeviceTree) -> DeviceNodes | None:
        """Create the group's files of one device (``device.absent``: the node families to leave out)."""
        return None

    def nodes(self, device: int) -> Any:
        """This part's nodes of device ``device`` (what `device_nodes` returned)."""
        return self.host.devices[device].nodes.get(self.name)

    def begin(self, now: float) -> None:
        """The workload is planned and no runtime runs yet: draw what the part needs, write its first files."""

    def step(self, now: float, dt: float) -> None:
        """One animation step (``dt`` seconds since the last)."""

    def write(self, now: float) -> None:
        """Rewrite the slowly changing files (every ``sysfs_interval`` seconds)."""

    def device_changed(self, device: int) -> None:
        """A runtime attached to or left ``device``, or its memory moved."""

    def apply(self, kind: str, command: dict[str, Any], detail: dict[str, Any]) -> str:
        """Apply one of ``commands``; fill ``detail`` (the ground truth's ``fault`` event); return why it cannot
        apply ("" when applied)."""
        return f"unknown command kind {kind!r}"

    def device_reset(self, device: int) -> None:
        """The device was reset: the driver's counts start again."""

    def device_removed(self, device: int) -> None:
        """The device vanished (its directory is gone already)."""

    def remove_nodes(self, device: int, family: str) -> None:
        """The files of ``family`` (one of ``node_families``) of ``device`` vanish."""

    def totals(self) -> dict[str, Any]:
        """This part's keys of the ground truth's ``totals`` event."""
        return {}

    def close(self) -> None:
        """Close what the part keeps open (its per-device nodes close with their `DeviceTree`)."""

    # -- for parts ----------------------------------------------------------------------------------------------
    def device_of(self, command: dict[str, Any], detail: dict[str, Any]) -> tuple[int, str]:
        """The command's ``device`` (recorded in ``detail``) and "" when it is present; else why not."""
        dev = int(command.get("device", 0))
        if not 0 <= dev < len(self.host.devices) or dev in self.host.removed_devices:
            return dev, f"no device {dev}"
        detail.update(device=dev)
        return dev, ""


@functools.cache
def parts() -> tuple[tuple[str, type[SimPart]], ...]:
    """Every group's simulator part, (group name, ``PART``), in the order of the group names: each folder of
    ``neuron_monitor.groups`` with a ``sim.py`` that defines ``PART``. Cached; ``parts.cache_clear()`` finds
    them again (a test that adds a group folder)."""
    found: list[tuple[str, type[SimPart]]] = []
    for info in sorted(pkgutil.iter_modules(groups.__path__), key=lambda m: m.name):
        module_name = f"{groups.__name__}.{info.name}.sim"
        if not info.ispkg or importlib.util.find_spec(module_name) is None:
            continue
        part = getattr(importlib.import_module(module_name), "PART", None)
        if isinstance(part, type) and issubclass(part, SimPart):
            found.append((info.name, part))
    return tuple(found)


def node_families() -> dict[str, list[str]]:
    """Node family -> the groups whose parts have nodes of it."""
    out: dict[str, list[str]] = {}
    for name, part in parts():
        for family in part.node_families:
            out.setdefault(family, []).append(name)
    return out
