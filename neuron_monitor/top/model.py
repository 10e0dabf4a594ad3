"""The screen model: one neuron-monitor report -> what `neuron-monitor-top` shows, with no terminal involved.

`screen_from_report` reads a report (a parsed JSON object, AWS's format plus our additive keys) through the
project's typed read layer (`neuron_monitor.schema.read`) and returns a `Screen`: host, per-device and per-core
rows, runtimes, and the errors the report carries (with the read layer's problems: a value of the wrong type is
left out and named, never raised on). A tag filter keeps only matching runtimes, and the device and core figures
are then those of the matching runtimes.

What the tables show comes from the group specs: each spec's `top_columns` and `top(value, period)` give the
runtime table's columns and the device table's extra columns (`GroupSpec.top`), and the figures summed over the
runtimes come from the specs' `sums` (`RuntimeSum`): a core's utilization is the sum over the runtimes using it
(capped at 100 %), its physical cores' likewise; a device's utilization is the mean over all of its logical cores
(cores no runtime reports count as idle); device memory is the sum of the runtimes' memory by category over the
device's cores, against `neuron_device_memory_size` when the report has it. The host line's bars are the system
groups' `top_bars` (CPU busy share, memory used); the models view is `top_models`, device power `top_device_power`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from neuron_monitor.daemon.tagmatch import TagFilter
from neuron_monitor.schema import names as N
from neuron_monitor.schema.info import HardwareInfo, InstanceInfo
from neuron_monitor.schema.read import Group, Report, RuntimeEntry, read_report
from neuron_monitor.schema.spec import (
    TOP_CORE_MEMORY,
    TOP_CORE_PHYSICAL,
    TOP_CORE_UTILIZATION,
    TOP_DEVICES,
    TOP_HOST,
    TOP_RUNTIMES,
    RuntimeSum,
    TopColumn,
    registry,
    sum_over_runtimes,
)
from neuron_monitor.schema.values import index

MISSING = "-"

Cells = dict[TopColumn, tuple[str, str]]  # column -> (text, style)


@dataclass(frozen=True)
class HostBar:
    """One bar of the host line (a spec's ``top_bars``): its label, how full (None: empty), the text after it."""

    label: str
    percent: float | None
    text: str
    history: str = ""  # the label of its full-width history graph ("": none; the column's ``history``)


@dataclass(frozen=True)
class Device:
    index: int
    utilization: float | None  # percent; None: no core utilization in the report at all
    cores: tuple[int, ...]
    memory: dict[str, int]  # category -> bytes
    memory_total: int | None
    cells: Cells = field(default_factory=dict)  # the specs' device columns
    power: float | None = None  # average power of the period, percent of the device's maximum (history only)
    details: tuple[str, ...] = ()  # the specs' whole story of its health (shown for the selected device)
    memory_unread: bool = False  # a runtime on it could not be read: its memory is not known (not the sum shown)

    @property
    def memory_used(self) -> int | None:
        return None if self.memory_unread else sum(self.memory.values())

    def cell(self, header: str) -> str:
        """The text of the spec column ``header`` ("-" when the device has none)."""
        return next((text for col, (text, _) in self.cells.items() if col.header == header), MISSING)


@dataclass(frozen=True)
class Core:
    index: int
    device: int
    utilization: float | None
    tags: tuple[str, ...]  # runtimes reporting this core
    memory_used: int
    physical: tuple[float, ...] = ()  # utilization of the physical cores behind a logical core (LNC=2)


@dataclass(frozen=True)
class Model:
    """One model a runtime has loaded (``memory_used.loaded_models``)."""

    name: str
    model_id: str
    running: bool
    device_bytes: int
    host_bytes: int
    cores: tuple[int, ...]  # NeuronCores its subgraphs run on, numbered across the host


@dataclass(frozen=True)
class Runtime:
    pid: int | None
    tag: str
    cores: tuple[int, ...]
    error: str  # the runtime's own error, or its first group error
    cells: Cells = field(default_factory=dict)  # the specs' runtime columns
    utilization: float | None = None  # mean over the runtime's cores of its own utilization (for sorting)
    memory: int = 0  # device memory over its cores (for sorting)
    models: tuple[Model, ...] | None = None  # None: the report lists no models for it

    def cell(self, header: str) -> str:
        """The text of the spec column ``header`` ("-" when the runtime has none)."""
        return next((text for col, (text, _) in self.cells.items() if col.header == header), MISSING)


@dataclass(frozen=True)
class Screen:
    instance_type: str = ""
    instance_id: str = ""
    device_type: str = ""
    device_count: int = 0
    cores_per_device: int = 0
    lnc: int | None = None
    report_time: float | None = None
    host: tuple[HostBar, ...] = ()
    devices: tuple[Device, ...] = ()
    cores: tuple[Core, ...] = ()
    runtimes: tuple[Runtime, ...] = ()
    hidden_runtimes: int = 0  # runtimes the tag filter left out
    errors: tuple[str, ...] = ()
    skipped_collections: int | None = None
    runtime_columns: tuple[TopColumn, ...] = ()  # every spec's runtime columns, in order
    device_columns: tuple[TopColumn, ...] = ()  # the spec device columns this report fills (or ``always`` ones)


def columns(panel: str) -> tuple[TopColumn, ...]:
    """Every spec's columns of a table, in their order."""
    found = [c for spec in registry().all() for c in spec.top_columns if c.panel == panel]
    return tuple(sorted(found, key=lambda c: c.order))


def _cells(groups: Mapping[str, Group], panel: str) -> dict[tuple[str, ...], Cells]:
    """key -> the cells of the groups' spec columns of a table."""
    out: dict[tuple[str, ...], Cells] = {}
    for group in groups.values():
        if group.spec.top_columns:
            for column, key, text, style in group.spec.top(group.data(), group.period):
                if column.panel == panel:
                    out.setdefault(key, {})[column] = (text, style)
    return out


def _host(report: Report) -> tuple[HostBar, ...]:
    """The host line's bars, from the system groups' specs (an ``always`` bar of an absent group stays empty)."""
    found: dict[TopColumn, HostBar] = {}
    for group in report.system.values():
        for column, label, percent, text in group.spec.top_bars(group.data()):
            found[column] = HostBar(label, percent, text, column.history)
    return tuple(
        found.get(c) or HostBar(c.header, None, c.missing, c.history)
        for c in columns(TOP_HOST)
        if c.always or c in found
    )


def _no_values(_: Any) -> Mapping[str, Mapping[str, float]]:
    return {}


def _drawn(role: str) -> RuntimeSum:
    """The spec sum top draws for ``role`` (``RuntimeSum.top``); an empty one when no spec declares it."""
    found = next((s for spec in registry().all() for s in spec.sums if s.top == role), None)
    return found or RuntimeSum(role, _no_values)


UTILIZATION_SUM = _drawn(TOP_CORE_UTILIZATION)
# the utilization sum's series top draws (core and device utilization): the first it declares
UTILIZATION_SERIES = UTILIZATION_SUM.series[0] if UTILIZATION_SUM.series else ""
PHYSICAL_SUM = _drawn(TOP_CORE_PHYSICAL)
MEMORY_SUM = _drawn(TOP_CORE_MEMORY)
# the order of the memory bar's runs (the memory sum's series); categories a newer report adds follow these
MEMORY_CATEGORIES = MEMORY_SUM.series


def _per_runtime(entry: RuntimeEntry, wanted: RuntimeSum) -> Mapping[str, Mapping[str, float]]:
    """One runtime's values of a cross-runtime sum ({} when its group is absent)."""
    for group in entry.groups.values():
        if wanted in group.spec.sums:
            return wanted.values(group.data())
    return {}


class _Sums:
    """The specs' cross-runtime sums over the kept runtimes, by core index."""

    def __init__(self, entries: list[RuntimeEntry], per_device: int) -> None:
        self.per_runtime = {
            s: [_per_runtime(e, s) for e in entries] for s in (UTILIZATION_SUM, PHYSICAL_SUM, MEMORY_SUM)
        }
        self.tags: dict[int, list[str]] = {}
        # the sums a runtime could not give (its group carries an error): core -> those sums, and the sums some
        # runtime could not give whose cores nothing else tells
        self.unread: dict[int, set[RuntimeSum]] = {}
        self.unread_somewhere: set[RuntimeSum] = set()
        for i, entry in enumerate(entries):
            cores = {c for s in (UTILIZATION_SUM, MEMORY_SUM) for c in self.per_runtime[s][i]}
            for core in sorted(cores, key=int):
                self.tags.setdefault(int(core), []).append(entry.tag)
            blind = {s for s in (UTILIZATION_SUM, MEMORY_SUM) if _unreadable(entry, s)}
            if blind:
                # its cores from its other group's figures, else from where its models are loaded
                where = {int(c) for c in cores} or {c for m in _models(entry, per_device) or () for c in m.cores}
                for index in where:
                    self.unread.setdefault(index, set()).update(blind)
                if not where:
                    self.unread_somewhere |= blind

    def known(self, core: int, wanted: RuntimeSum) -> bool:
        """Whether every runtime on ``core`` gave ``wanted`` (a core of a runtime that could not be read is not)."""
        return wanted not in self.unread.get(core, ())

    def by_core(self, wanted: RuntimeSum) -> dict[int, dict[str, float]]:
        totals = sum_over_runtimes(self.per_runtime[wanted], wanted.integer)
        return {int(core): values for core, values in totals.items()}


def _unreadable(entry: RuntimeEntry, wanted: RuntimeSum) -> bool:
    """Whether the runtime's group behind ``wanted`` is there but carries an error (it could not be read)."""
    return any(wanted in g.spec.sums and bool(g.error) for g in entry.groups.values())


def _models(entry: RuntimeEntry, cores_per_device: int) -> tuple[Model, ...] | None:
    """The runtime's loaded models, from the first of its groups whose spec lists them (``top_models``), their
    cores numbered across the host as in the runtimes view and det."""
    for group in entry.groups.values():
        listed = group.spec.top_models(group.data(), cores_per_device)
        if listed is not None:
            return tuple(Model(*m) for m in listed)
    return None


def _runtime(entry: RuntimeEntry, sums: Iterable[RuntimeSum], cores_per_device: int) -> Runtime:
    cores: set[int] = set()
    for wanted in sums:
        cores.update(int(c) for c in _per_runtime(entry, wanted))
    utils = [v[UTILIZATION_SERIES] for v in _per_runtime(entry, UTILIZATION_SUM).values() if UTILIZATION_SERIES in v]
    memory = sum(sum(v.values()) for v in _per_runtime(entry, MEMORY_SUM).values())
    error = entry.error
    if not error:
        error = next((f"{name}: {g.error}" for name, g in entry.groups.items() if g.error), "")
    return Runtime(
        pid=entry.pid,
        tag=entry.tag or "?",
        cores=tuple(sorted(cores)),
        error=error,
        cells=_cells(entry.groups, TOP_RUNTIMES).get((), {}),
        utilization=sum(utils) / len(utils) if utils else None,
        memory=int(memory),
        models=_models(entry, cores_per_device),
    )


def _num(parent: Any, key: str) -> float | None:
    v = parent.get(key) if isinstance(parent, Mapping) else None
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def _str(parent: Any, key: str) -> str:
    v = parent.get(key) if isinstance(parent, Mapping) else None
    return v if isinstance(v, str) else ""


def _errors(report: Report) -> list[str]:
    out: list[str] = []
    hardware, instance, k8s = report.hardware_info, report.instance_info, report.k8s_info
    for key, text in (
        (N.NEURON_MONITOR, _str(report.monitor, N.ERROR)),
        (N.NEURON_HARDWARE_INFO, hardware.error if hardware else ""),
        (N.INSTANCE_INFO, instance.error if instance else ""),
        (N.NEURON_K8S_INFO, k8s.error if k8s else ""),
    ):
        if text:
            out.append(f"{key}: {text}")
    if report.problems:
        out.append(f"malformed report: {report.problems.first()}")
    for name, group in report.system.items():
        out += _group_errors(name, group)
    for entry in report.runtimes:
        who = f"runtime {entry.tag} (pid {entry.pid_label})"
        if entry.error:
            out.append(f"{who}: {entry.error}")
        for name, group in entry.groups.items():
            out += _group_errors(f"{who} {name}", group)
    return out


def _group_errors(who: str, group: Group) -> list[str]:
    """The group's error and read problems; an error that says the host has none of the group's source (no EFA
    adapter: ``Group.absent``) is not one, as for the exporters."""
    out = [f"{who}: {group.error}"] if group.error and not group.absent else []
    problems = group.read()[1]
    if problems:
        out.append(f"{who}: malformed: {problems.first()}")
    return out


def _core_rows(sums: _Sums, device_count: int, per_device: int) -> tuple[Core, ...]:
    util = {c: v[UTILIZATION_SERIES] for c, v in sums.by_core(UTILIZATION_SUM).items() if UTILIZATION_SERIES in v}
    physical = sums.by_core(PHYSICAL_SUM)
    memory = sums.by_core(MEMORY_SUM)
    seen = set(sums.tags) | set(util)
    return tuple(
        Core(
            index=i,
            device=i // per_device if per_device else 0,
            utilization=(
                None
                if not sums.known(i, UTILIZATION_SUM) or (i not in util and UTILIZATION_SUM in sums.unread_somewhere)
                else min(100.0, util[i])
                if i in util
                else (0.0 if util else None)
            ),
            tags=tuple(sums.tags.get(i, ())),
            memory_used=int(sum(memory.get(i, {}).values())),
            physical=tuple(min(100.0, p) for p in physical.get(i, {}).values()),
        )
        for i in sorted(set(range(device_count * per_device)) | seen)
    )


def _powers(report: Report) -> dict[int, float]:
    """device index -> average power of the period (percent), from the system groups' ``top_device_power``."""
    out: dict[int, float] = {}
    for group in report.system.values():
        out.update(group.spec.top_device_power(group.data()))
    return out


def _details(report: Report) -> dict[int, tuple[str, ...]]:
    """device index -> the system groups' ``top_device_details`` lines, in the groups' order."""
    out: dict[int, tuple[str, ...]] = {}
    for group in report.system.values():
        for dev, lines in group.spec.top_device_details(group.data()).items():
            out[dev] = out.get(dev, ()) + tuple(lines)
    return out


def _device_rows(
    cores: tuple[Core, ...],
    sums: _Sums,
    device_count: int,
    size: float | None,
    cells: dict[tuple[str, ...], Cells],
    powers: Mapping[int, float],
    details: Mapping[int, tuple[str, ...]],
) -> tuple[Device, ...]:
    memory = sums.by_core(MEMORY_SUM)
    devices = []
    for dev in range(device_count):
        mine = [c for c in cores if c.device == dev]
        memory_by_cat: dict[str, int] = {}
        for c in mine:
            for cat, n in memory.get(c.index, {}).items():
                memory_by_cat[cat] = memory_by_cat.get(cat, 0) + int(n)
        utils = [c.utilization for c in mine if c.utilization is not None]
        devices.append(
            Device(
                index=dev,
                utilization=sum(utils) / len(mine) if utils else None,
                cores=tuple(c.index for c in mine),
                memory=memory_by_cat,
                memory_total=int(size) if size else None,
                cells=cells.get((str(dev),), {}),
                power=powers.get(dev),
                details=details.get(dev, ()),
                memory_unread=MEMORY_SUM in sums.unread_somewhere
                or any(not sums.known(c.index, MEMORY_SUM) for c in mine),
            )
        )
    return tuple(devices)


def screen_from_report(raw: Mapping[str, Any], tag_filter: TagFilter | None = None) -> Screen:
    """Build the screen model of one report; runtimes whose tag does not match ``tag_filter`` are left out."""
    report = read_report(dict(raw))
    hw = report.hardware_info or HardwareInfo()
    entries = [e for e in report.runtimes if tag_filter is None or tag_filter.search(e.tag_written)]
    device_count = index(hw.neuron_device_count) or 0
    per_device = report.cores_per_device
    sums = _Sums(entries, per_device)
    seen = set(sums.tags) | {c for c, v in sums.by_core(UTILIZATION_SUM).items() if v}
    if not per_device and seen:  # old reports without the count: one device holds every core
        per_device = max(seen) + 1
    if not device_count and seen and per_device:
        device_count = max(seen) // per_device + 1
    cores = _core_rows(sums, device_count, per_device)
    device_cells = _cells(report.system, TOP_DEVICES)
    filled = {col for cells in device_cells.values() for col in cells}
    instance = report.instance_info or InstanceInfo()
    lnc = _float(hw.logical_neuroncore_config)
    skipped = _num(report.monitor, "skipped_collections")
    return Screen(
        instance_type=instance.instance_type or "",
        instance_id=instance.instance_id or "",
        device_type=hw.neuron_device_type or "",
        device_count=device_count,
        cores_per_device=per_device,
        lnc=int(lnc) if lnc is not None else None,
        report_time=report.report_time,
        host=_host(report),
        devices=_device_rows(
            cores,
            sums,
            device_count,
            _float(hw.neuron_device_memory_size),
            device_cells,
            _powers(report),
            _details(report),
        ),
        cores=cores,
        runtimes=tuple(_runtime(e, (UTILIZATION_SUM, MEMORY_SUM), per_device) for e in entries),
        hidden_runtimes=len(report.runtimes) - len(entries),
        errors=tuple(_errors(report)),
        skipped_collections=int(skipped) if skipped is not None else None,
        runtime_columns=columns(TOP_RUNTIMES),
        device_columns=tuple(c for c in columns(TOP_DEVICES) if c.always or c in filled),
    )
