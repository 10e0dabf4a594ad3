# The compiled helper's interface (neuron_monitor/_native.c); see neuron_monitor/native.py. Counter arrays are
# typed as what callers hold (Sequence[int]); the helper answers only for array("Q") and returns None for the rest.
from collections.abc import Mapping, Sequence
from typing import Any, overload

from typing_extensions import Buffer

def vcpu_usage(prev: bytes, cur: bytes, /) -> dict[str, Any] | None: ...
@overload
def deltas(cur: Sequence[int], prev: Sequence[int], positions: Buffer, often: int, /) -> list[int] | None: ...
@overload
def deltas(
    cur: Sequence[int],
    prev: Sequence[int],
    positions: Buffer,
    often: int,
    limits: Buffer,
    dt: float,
    tops: Sequence[int],
    /,
) -> list[int] | int | None: ...
def cores(
    deltas: list[int],
    n: int,
    dt: float,
    limit: float,
    keys: tuple[str, ...],
    first: int,
    group: str | None,
    name0: str | None,
    name1: str | None,
    reuse: dict[str, Any] | None = None,
    /,
) -> dict[str, Any] | None: ...
def summary(
    deltas: list[int],
    counters: Sequence[int],
    positions: Buffer,
    exec_names: tuple[str, ...],
    err_names: tuple[str, ...],
    pct_names: tuple[str, ...],
    pct_values: tuple[float, ...],
    /,
) -> dict[str, Any] | None: ...
def pid_usage(
    data: bytes, utime: int, stime: int, dt: float, ticks: int, /
) -> tuple[dict[str, Any], int, int] | None: ...
def application(
    cur: Sequence[int],
    prev: Sequence[int],
    mem_prev: Sequence[int] | None,
    dt: float,
    kit: tuple[Any, ...],
    reuse: dict[str, Any] | None,
    /,
) -> tuple[dict[str, Any], dict[str, Any], tuple[bool, ...], bool] | None: ...
def add_counts(
    totals: dict[tuple[str, ...], float],
    head: tuple[str, ...],
    values: Mapping[str, float],
    scale: float,
    most: float,
    limit: int,
    keyed: bool,
    /,
) -> bool | None: ...
def thin_report(
    line: bytes,
    system: tuple[tuple[bytes, tuple[tuple[tuple[bytes, ...], bool], ...]], ...],
    runtime: tuple[tuple[bytes, tuple[tuple[tuple[bytes, ...], bool], ...]], ...],
    /,
) -> bytes | None: ...
