"""A Neuron application as the scheduler and the runtime groups see it, and the contract of the source listing them.

This module sits below both `neuron_monitor.groups` (whose runtime groups read an `App`) and
`neuron_monitor.neuron` (whose `NeuronAppSource` builds them), so neither package imports the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class App:
    """One Neuron application (a process attached to one or more Neuron devices).

    ``data`` is whatever the app source read for it in this snapshot (for the Neuron backend: the parsed
    data blocks per device); runtime groups know how to read it. ``error`` is an app-level problem that is
    reported on the runtime entry.
    """

    pid: int
    tag: str
    error: str = ""
    data: Any = None
    devices: tuple[int, ...] = field(default_factory=tuple)


class AppSource(Protocol):
    """Lists the Neuron applications present now (read once per tick and shared by every runtime group).

    An ``App`` handed out is never changed afterwards (its ``data`` may be refreshed). ``version`` (read after
    `snapshot`) changes whenever the list changed: an application came or went, or changed its tag or error.
    While it stays the same, the scheduler skips sorting the applications into scopes again."""

    @property
    def version(self) -> int: ...

    def snapshot(self) -> list[App]: ...

    @property
    def problem(self) -> str:
        """Why some device's applications could not be listed at the last snapshot ("" when none)."""
        ...

    def close(self) -> None: ...
