"""``memory_info`` (system): the host's memory and swap, total and used, in bytes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from neuron_monitor.groups.memory_info import body as B
from neuron_monitor.schema import names as N
from neuron_monitor.schema import spec as S
from neuron_monitor.schema.display import count, finite, human_bytes
from neuron_monitor.schema.values import Problems, number


@dataclass(slots=True)
class MemoryInfo:
    fields: dict[str, float]  # every numeric ``*_bytes`` field, in report order


def read(body: dict[str, Any], where: str, problems: Problems) -> MemoryInfo:
    fields: dict[str, float] = {}
    for key, value in body.items():
        if key.endswith("_bytes"):
            if key in B.FIELDS:
                amount = number(value, problems, where, key)
            else:  # an unknown field is used only when it is a number
                amount = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
            if amount is not None:
                fields[key] = amount
    return MemoryInfo(fields)


FAMILIES = {  # system_memory_total_bytes, "System memory total_bytes bytes", ... as AWS's exporter names them
    key: S.PromFamily(f"system_{key}", S.GAUGE, "System {} {} bytes".format(*key.split("_", 1)), S.INSTANCE_SCOPE)
    for key in B.FIELDS
}


def gauges(value: MemoryInfo) -> Iterator[S.PromSample]:
    for key, family in FAMILIES.items():
        amount = value.fields.get(key)
        if amount is not None:
            yield S.PromSample(family, (), {key: amount}, 1.0, ())


CW_FIELD = S.CwMetric("Host", S.BYTES, S.HOST_DIMS, keyed=True)  # Host + the field without "_bytes"
CW_UTILIZATION = S.CwMetric("HostMemoryUtilization", S.PERCENT, S.HOST_DIMS)


def datums(value: MemoryInfo, period: float, per_vcpu: bool) -> Iterator[S.CwDatum]:
    for key, amount in value.fields.items():
        yield CW_FIELD, (), key[: -len("_bytes")], amount
    total, used = value.fields.get(B.MEMORY_TOTAL_BYTES), value.fields.get(B.MEMORY_USED_BYTES)
    if total and used is not None and total > 0:
        yield CW_UTILIZATION, (), "", 100.0 * used / total


TRACK_MEMORY = S.Track("host memory", "host_memory", "bytes", S.HOST_TRACK, when=S.ALWAYS, host=True)
_TRACK_SERIES = {"used": B.MEMORY_USED_BYTES, "total": B.MEMORY_TOTAL_BYTES, "swap_used": B.SWAP_USED_BYTES}


def timeline(value: MemoryInfo) -> Iterator[S.TimelineSample]:
    """Used and total memory, used swap (bytes)."""
    known = {k: count(v) for k in B.FIELDS if (v := finite(value.fields.get(k))) is not None}
    if known:
        yield TRACK_MEMORY, (), {name: known[key] for name, key in _TRACK_SERIES.items() if key in known}


# neuron-monitor-top: the host line's memory bar (used of total, as `free` counts used; swap when there is some)
BAR_MEMORY = S.TopColumn(S.TOP_HOST, "mem", 0, order=20, always=True, missing=" -/-")


def top_bars(value: MemoryInfo) -> Iterator[S.TopBar]:
    def whole(key: str) -> int | None:
        v = value.fields.get(key)
        return None if v is None else int(v)

    used, total = whole(B.MEMORY_USED_BYTES), whole(B.MEMORY_TOTAL_BYTES)
    percent = 100.0 * used / total if used is not None and total else None
    text = f" {human_bytes(used)}/{human_bytes(total)}"
    if whole(B.SWAP_TOTAL_BYTES):
        text += f"  swap {human_bytes(whole(B.SWAP_USED_BYTES))}"
    yield BAR_MEMORY, "mem", percent, text


SPEC = S.GroupSpec(
    name=N.MEMORY_INFO,
    placement=S.SYSTEM,
    read=read,
    doc=__doc__ or "",
    prometheus=tuple(FAMILIES.values()),
    gauges=gauges,
    cloudwatch=(CW_FIELD, CW_UTILIZATION),
    datums=datums,
    tracks=(TRACK_MEMORY,),
    timeline=timeline,
    timeline_order=20,
    top_columns=(BAR_MEMORY,),
    top_bars=top_bars,
)
