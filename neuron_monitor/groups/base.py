"""The metric-group contract: what a group reads, what it returns, and what the scheduler adds.

A *system group* (``system_data``) returns the body of one group object per collection.
A *runtime group* (``neuron_runtime_data[].report``) returns one body per monitored application.

Groups never write ``error`` for their whole object, ``fresh``, or (system groups) ``period``: the scheduler adds
them. Raising any exception from ``collect`` fills the group's ``error`` with the message and leaves every other
group untouched. Counters in a body are counts over the captured period, each reported once.

A group may return the very same body object again when nothing in it changed (memory_used does); it must then
never mutate that object. The scheduler relies on this: it encodes such a body's values once and splices the
bytes into later reports for as long as the object is returned (see report.encoded_values).

Otherwise a group may reuse the objects *inside* its previous body and update them in place at its next
collection, as long as each body it returns is a new object (neuroncore_counters does, to spare the dicts of
``neuroncores_in_use``: docs/performance.md). The scheduler encodes every report before the next collection starts,
so a reader that keeps a body past the collection that made it must encode or copy it first.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.app import App
from neuron_monitor.util.errors import GroupError as GroupError  # re-exported: the contract groups raise


class SystemGroup(ABC):
    """A system-level metric group. One instance lives for the daemon's lifetime and may keep state."""

    type_name: ClassVar[str]

    def __init__(self, root: RootFS) -> None:
        self.root = root

    def prime(self) -> None:  # noqa: B027 - optional hook
        """Take a baseline so the first collection has a real delta. Default: nothing to do."""

    @abstractmethod
    def collect(self) -> dict[str, Any]:
        """Return the group's body (without ``period``/``fresh``). Raise when nothing could be read; put an
        ``error`` in the body when the data is partial (e.g. some devices lack a counter file)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release kept descriptors."""

    def sources(self) -> dict[str, Any] | None:
        """What the group found of the Neuron driver's nodes, for the report's ``neuron_monitor.sources``:
        ``{"layout": "known:<name>" | "discovered" | "none", "found": {family: bool}}`` (neuron/sysfs.py
        `DriverTree.sources`); None for a group that reads none."""
        return None


class RuntimeGroup(ABC):
    """A runtime-level metric group, one instance per ``neuron_runtimes`` entry, state kept per pid."""

    type_name: ClassVar[str]

    def __init__(self, root: RootFS) -> None:
        self.root = root

    @abstractmethod
    def collect(self, apps: Sequence[App], gone: Sequence[App]) -> dict[int, dict[str, Any]]:
        """Return one body per pid.

        ``apps`` are the monitored applications present now. ``gone`` are applications that vanished since
        this group last ran (their last-known ``App``): return a final body for them to report the counts
        they accrued since the previous collection, or leave them out. Forget their state either way.

        A body may contain ``error`` (this app's collection failed) and ``period`` (the group measured its own
        interval, e.g. since the process started); the scheduler fills whichever is missing.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release kept descriptors."""
