"""The read layer: a decoded report (the dict orjson gives) -> typed values, never an exception.

``read_report`` checks the envelope (runtime entries, group objects, their ``period``/``error``/``fresh``) and
returns a ``Report``. Each known group becomes a ``Group`` whose body is read by its spec's reader only when a
consumer asks (``Group.read``), once, and cached: a consumer that needs two groups of a runtime pays for two.
Groups no spec knows are skipped, as AWS's exporters skip them.

A value of the wrong type is never raised on: the reader leaves it out (``None``, or absent from a map) and
records a problem on the ``Problems`` of the report (envelope) or of the group (body). A problem is a *count*
problem when the value feeds a per-period counter (execution summaries, FLOPs, ECC events, CPU time, context
switches, a group's period or error, a runtime's identity): a consumer that accumulates counters must not
accept a report with one. Every other problem is a *value* problem. Each consumer decides its own policy: the
Prometheus exporter rejects a report with count problems at ingest and keeps serving the previous report when
its gauges have value problems; the CloudWatch exporter and the timeline skip the bad values only.

JSON ``null`` and missing keys are normal (idle latency, absent groups) and are no problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from neuron_monitor.schema import names as N
from neuron_monitor.schema.info import (
    HardwareInfo,
    InstanceInfo,
    K8sInfo,
    Sources,
    read_hardware_info,
    read_instance_info,
    read_k8s_info,
    read_sources,
)
from neuron_monitor.schema.spec import GroupSpec, Registry, registry
from neuron_monitor.schema.values import Problems, mapping, number, sequence, text

T = TypeVar("T")


# ---- the envelope -----------------------------------------------------------------------------------------------
@dataclass(slots=True, eq=False)
class Group:
    """One known group object: its envelope read, its body read on demand by the spec's reader."""

    name: str
    spec: GroupSpec[Any]
    body: dict[str, Any]
    parent: str  # the path of the object holding the group ("system_data", "neuron_runtime_data[0].report")
    period: float | None
    error: str
    fresh_flag: bool | None  # the ``fresh`` key as written (None when absent: AWS's daemon)
    _data: Any = None
    _problems: Problems | None = None

    @property
    def where(self) -> str:
        """The group's path in the report, for problem messages."""
        return f"{self.parent}.{self.name}"

    @property
    def fresh(self) -> bool:
        """Collected for this report (absent ``fresh`` counts as fresh, as AWS's daemon writes none)."""
        return self.fresh_flag is not False

    @property
    def absent(self) -> bool:
        """The ``error`` says the host has none of the group's source (``GroupSpec.absent_error``): not a failure."""
        prefix = self.spec.absent_error
        return bool(prefix) and self.error.startswith(prefix)

    @property
    def usable(self) -> bool:
        """No ``error``, or a partial one (see ``GroupSpec.partial_errors``) with data beside it."""
        if not self.error:
            return True
        return self.spec.partial_errors and any(k not in N.ENVELOPE_KEYS for k in self.body)

    def read(self) -> tuple[Any, Problems]:
        """The body as the spec's typed value, with the problems found (read once, then cached)."""
        problems = self._problems
        if problems is None:
            problems = Problems()
            self._data = self.spec.read(self.body, self.where, problems)
            self._problems = problems
        return self._data, problems

    def data(self) -> Any:
        return self.read()[0]

    def data_as(self, cls: type[T]) -> T | None:
        """The typed body if it is a ``cls`` (the group's spec reads into ``cls``), else None."""
        data = self.read()[0]
        return data if isinstance(data, cls) else None


@dataclass(slots=True, eq=False)
class RuntimeEntry:
    """One ``neuron_runtime_data`` entry: its identity, its ``error``, and its known groups."""

    where: str
    pid: int | None  # None when the pid is not an integer
    pid_label: str  # the pid as a label value ("" when missing)
    tag: str  # ``neuron_runtime_tag``, the pid when the tag is null/missing (as neuron-monitor does)
    tag_written: str  # the tag as written ("" when null/missing)
    error: str
    groups: dict[str, Group]


_UNREAD: Any = object()


@dataclass(slots=True, eq=False)
class Report:
    """A report with its envelope checked. ``problems`` holds the envelope's (count problems, values).

    The info objects are typed (``schema/info.py``) and read on first use, then cached, as group bodies are; each
    carries its own ``problems``. None when the report has no such object (or a wrong-typed one: see ``problems``)."""

    raw: dict[str, Any]
    runtimes: list[RuntimeEntry]
    system: dict[str, Group]
    instance_object: dict[str, Any] | None  # the objects as decoded (checked to be objects), read on first use
    hardware_object: dict[str, Any] | None
    k8s_object: dict[str, Any] | None
    monitor: dict[str, Any] | None
    report_time: float | None
    cores_per_device: int  # 0 when the report does not say
    problems: Problems = field(default_factory=Problems)
    _instance: Any = _UNREAD
    _hardware: Any = _UNREAD
    _k8s: Any = _UNREAD
    _sources: Any = _UNREAD

    @property
    def instance_info(self) -> InstanceInfo | None:
        """``instance_info``, typed (read once)."""
        if self._instance is _UNREAD:
            obj = self.instance_object
            self._instance = None if obj is None else read_instance_info(obj)
        return self._instance  # type: ignore[no-any-return]

    @property
    def hardware_info(self) -> HardwareInfo | None:
        """``neuron_hardware_info``, typed (read once)."""
        if self._hardware is _UNREAD:
            obj = self.hardware_object
            self._hardware = None if obj is None else read_hardware_info(obj)
        return self._hardware  # type: ignore[no-any-return]

    @property
    def k8s_info(self) -> K8sInfo | None:
        """``neuron_k8s_info``, typed (read once)."""
        if self._k8s is _UNREAD:
            obj = self.k8s_object
            self._k8s = None if obj is None else read_k8s_info(obj)
        return self._k8s  # type: ignore[no-any-return]

    @property
    def sources(self) -> Sources | None:
        """What the daemon found of the Neuron driver's nodes (``neuron_monitor.driver_version`` and
        ``.sources``), typed (read once); None when the report has no ``neuron_monitor`` object."""
        if self._sources is _UNREAD:
            obj = self.monitor
            self._sources = None if obj is None else read_sources(obj)
        return self._sources  # type: ignore[no-any-return]


def _group(name: str, spec: GroupSpec[Any], obj: Any, where: str, problems: Problems) -> Group | None:
    if obj.__class__ is dict:
        body: dict[str, Any] = obj
    else:
        checked = mapping(obj, problems, where, name, counted=True)
        if checked is None:
            return None
        body = checked
    period = body.get(N.PERIOD)
    if period is not None and period.__class__ is not float:
        period = number(period, problems, f"{where}.{name}", N.PERIOD, counted=True)
    error = body.get(N.ERROR)
    if error.__class__ is not str:
        error = text(error, problems, f"{where}.{name}", N.ERROR, counted=True)
    fresh = body.get(N.FRESH)
    return Group(name, spec, body, where, period, error, fresh if fresh.__class__ is bool else None)


_registry: Registry | None = None


def _specs() -> Registry:
    """The spec registry, found on first use (the group folders' specs are imported then)."""
    global _registry
    if _registry is None:
        _registry = registry()
    return _registry


def _groups(
    parent: dict[str, Any], specs: dict[str, GroupSpec[Any]], where: str, problems: Problems
) -> dict[str, Group]:
    out: dict[str, Group] = {}
    for name, obj in parent.items():
        spec = specs.get(name)
        if spec is None:
            continue  # groups no spec knows are skipped unread
        if obj.__class__ is dict:  # the usual group: its envelope checked inline (this runs ~70 times a report)
            period = obj.get(N.PERIOD)
            error = obj.get(N.ERROR)
            fresh = obj.get(N.FRESH)
            if period.__class__ is float and error.__class__ is str:
                out[name] = Group(name, spec, obj, where, period, error, fresh if fresh.__class__ is bool else None)
                continue
        group = _group(name, spec, obj, where, problems)
        if group is not None:
            out[name] = group
    return out


def read_runtime(entry: dict[str, Any], where: str, problems: Problems) -> RuntimeEntry:
    """One runtime entry (its groups' bodies unread)."""
    raw_pid = entry.get(N.PID)
    pid = raw_pid if raw_pid.__class__ is int else None
    pid_label = str(raw_pid) if pid is not None else text(raw_pid, problems, where, N.PID, counted=True)
    raw_tag = entry.get(N.RUNTIME_TAG)
    tag_written = raw_tag if raw_tag.__class__ is str else text(raw_tag, problems, where, N.RUNTIME_TAG, True)
    error = entry.get(N.ERROR)
    if error.__class__ is not str:
        error = text(error, problems, where, N.ERROR, counted=True)
    report = entry.get(N.REPORT)
    if report.__class__ is not dict:
        report = mapping(report, problems, where, N.REPORT, counted=True) or {}
    groups = _groups(report, _specs().runtime, f"{where}.{N.REPORT}", problems)
    tag = tag_written if raw_tag is not None else pid_label
    return RuntimeEntry(where, pid, pid_label, tag, tag_written, error, groups)


def read_report(raw: dict[str, Any]) -> Report:
    """Check a report's envelope; group bodies are read later, on demand (``Group.read``)."""
    problems = Problems()
    runtimes: list[RuntimeEntry] = []
    entries = sequence(raw.get(N.NEURON_RUNTIME_DATA), problems, "report", N.NEURON_RUNTIME_DATA, True) or ()
    for i, entry in enumerate(entries):
        where = f"{N.NEURON_RUNTIME_DATA}[{i}]"
        if entry.__class__ is dict or isinstance(entry, dict):
            runtimes.append(read_runtime(entry, where, problems))
        elif entry is not None:
            problems.bad(N.NEURON_RUNTIME_DATA, f"[{i}]", entry, "an object", True)
    system_data = mapping(raw.get(N.SYSTEM_DATA), problems, "report", N.SYSTEM_DATA, True) or {}
    system = _groups(system_data, _specs().system, N.SYSTEM_DATA, problems)
    hardware = mapping(raw.get(N.NEURON_HARDWARE_INFO), problems, "report", N.NEURON_HARDWARE_INFO)
    per_device = number(
        (hardware or {}).get(N.NEURONCORE_PER_DEVICE_COUNT),
        problems,
        N.NEURON_HARDWARE_INFO,
        N.NEURONCORE_PER_DEVICE_COUNT,
    )
    return Report(
        raw=raw,
        runtimes=runtimes,
        system=system,
        instance_object=mapping(raw.get(N.INSTANCE_INFO), problems, "report", N.INSTANCE_INFO),
        hardware_object=hardware,
        k8s_object=mapping(raw.get(N.NEURON_K8S_INFO), problems, "report", N.NEURON_K8S_INFO),
        monitor=mapping(raw.get(N.NEURON_MONITOR), problems, "report", N.NEURON_MONITOR),
        report_time=number(raw.get(N.REPORT_TIME), problems, "report", N.REPORT_TIME, counted=True),
        cores_per_device=int(per_device) if per_device and 0 < per_device < 1e9 else 0,
        problems=problems,
    )
