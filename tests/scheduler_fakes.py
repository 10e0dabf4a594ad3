"""Fakes the scheduler's tests share: a clock the test advances and an application source with no applications."""

from __future__ import annotations

from typing import Any


class StepClock:
    """A clock the test advances, so periods and due times are exact."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class NoApps:
    """An application source that never lists a running application."""

    version = 0

    def snapshot(self) -> list[Any]:
        return []

    def close(self) -> None:
        pass
