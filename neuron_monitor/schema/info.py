"""The report's info objects, typed: ``instance_info``, ``neuron_hardware_info`` and ``neuron_k8s_info``.

Each reader takes the object as decoded (a dict, already checked to be one by ``read_report``) and returns a small
value read through the schema's value readers (``neuron_monitor.schema.values``) with their one error policy: a
value of the wrong type is left out (``None``, or absent from a map) and recorded on the value's ``problems`` (a
*value* problem), never raised. JSON ``null`` and missing keys are normal. ``Report`` reads each object on first
use and caches it (``Report.instance_info`` ...); each consumer decides what a problem costs (the Prometheus
exporter skips the report, the others leave the value out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from neuron_monitor.schema import names as N
from neuron_monitor.schema.values import Problems, mapping, number, sequence, text

# ---- readers of one key -----------------------------------------------------------------------------------------


def _text(obj: dict[str, Any], key: str, problems: Problems, where: str) -> str | None:
    """A text value as written (numbers printed); None when null/missing or of the wrong type (recorded)."""
    value = obj.get(key)
    if value is None:
        return None
    if value.__class__ is str:
        return value
    if isinstance(value, dict | list):
        text(value, problems, where, key)
        return None
    return text(value, problems, where, key)


def _number(obj: dict[str, Any], key: str, problems: Problems, where: str) -> int | float | None:
    """A number as written (an int stays an int, so a label shows it as AWS wrote it); None when null/missing or of
    the wrong type (recorded)."""
    value = obj.get(key)
    if value.__class__ is int or value.__class__ is float:
        return value
    n = number(value, problems, where, key)
    if n is None:
        return None
    return int(value) if isinstance(value, int) else n


# ---- instance_info ----------------------------------------------------------------------------------------------
@dataclass(slots=True)
class InstanceInfo:
    """``instance_info``: the EC2 identity (AWS's keys) and, on UltraServer members, the UltraServer keys. A field is
    None when the report does not carry it (or carries a wrong type: see ``problems``)."""

    instance_name: str | None = None
    instance_id: str | None = None
    instance_type: str | None = None
    instance_availability_zone: str | None = None
    instance_availability_zone_id: str | None = None
    instance_region: str | None = None
    ami_id: str | None = None
    subnet_id: str | None = None
    ultraserver_id: str | None = None
    ultraserver_node_id: str | None = None
    ultraserver_node_count: str | None = None
    ultraserver_modes: str | None = None
    error: str = ""
    problems: Problems = field(default_factory=Problems, compare=False, repr=False)

    def get(self, key: str) -> str | None:
        """The field named as the report's key (``INSTANCE_KEYS``), for consumers that map keys to labels."""
        return getattr(self, key) if key in INSTANCE_KEYS else None


INSTANCE_KEYS: tuple[str, ...] = (
    *N.INSTANCE_INFO_KEYS,
    "ultraserver_id",
    "ultraserver_node_id",
    "ultraserver_node_count",
    "ultraserver_modes",
)


def read_instance_info(obj: dict[str, Any]) -> InstanceInfo:
    """The typed ``instance_info`` object."""
    problems = Problems()
    where = N.INSTANCE_INFO
    info = InstanceInfo(problems=problems)
    for key in INSTANCE_KEYS:
        setattr(info, key, _text(obj, key, problems, where))
    info.error = _text(obj, N.ERROR, problems, where) or ""
    return info


# ---- neuron_hardware_info ---------------------------------------------------------------------------------------
@dataclass(slots=True)
class HardwareInfo:
    """``neuron_hardware_info``: numbers as written (int or float), None when absent or wrong-typed."""

    neuron_device_count: int | float | None = None
    neuroncore_per_device_count: int | float | None = None
    neuron_device_memory_size: int | float | None = None
    neuron_device_type: str | None = None
    neuron_device_version: str | None = None
    neuroncore_version: str | None = None
    logical_neuroncore_config: int | float | None = None
    error: str = ""
    problems: Problems = field(default_factory=Problems, compare=False, repr=False)

    def get(self, key: str) -> int | float | str | None:
        """The field named as the report's key (``HARDWARE_KEYS``), for consumers that map keys to labels."""
        return getattr(self, key) if key in HARDWARE_KEYS else None


HARDWARE_KEYS: tuple[str, ...] = (
    "neuron_device_count",
    "neuroncore_per_device_count",
    "neuron_device_memory_size",
    "neuron_device_type",
    "neuron_device_version",
    "neuroncore_version",
    "logical_neuroncore_config",
)
_HARDWARE_TEXT = frozenset(("neuron_device_type", "neuron_device_version", "neuroncore_version"))


def read_hardware_info(obj: dict[str, Any]) -> HardwareInfo:
    """The typed ``neuron_hardware_info`` object."""
    problems = Problems()
    where = N.NEURON_HARDWARE_INFO
    info = HardwareInfo(problems=problems)
    for key in HARDWARE_KEYS:
        reader = _text if key in _HARDWARE_TEXT else _number
        setattr(info, key, reader(obj, key, problems, where))
    info.error = _text(obj, N.ERROR, problems, where) or ""
    return info


# ---- neuron_k8s_info -------------------------------------------------------------------------------------------
@dataclass(slots=True)
class K8sEntry:
    """The pod holding one NeuronCore or Neuron device; the DRA keys are None when the entry is not from a claim."""

    pod_name: str | None = None
    namespace: str | None = None
    containers: tuple[str, ...] = ()  # ``container_name``: a string or an array of them as written
    pod_uid: str | None = None
    claim_name: str | None = None
    claim_namespace: str | None = None


@dataclass(slots=True)
class K8sInfo:
    """``neuron_k8s_info``: NeuronCore index -> pod and Neuron device index -> pod (indexes as written, strings)."""

    period: float | None = None
    cores: dict[str, K8sEntry] = field(default_factory=dict)
    devices: dict[str, K8sEntry] = field(default_factory=dict)
    error: str = ""
    problems: Problems = field(default_factory=Problems, compare=False, repr=False)


K8S_CORES = "neuroncores_k8s_info"
K8S_DEVICES = "neurondevices_k8s_info"


def _k8s_entry(obj: dict[str, Any], problems: Problems, where: str) -> K8sEntry:
    raw = obj.get("container_name")
    containers: tuple[str, ...] = ()
    if raw.__class__ is str:
        containers = (raw,)
    else:
        items = sequence(raw, problems, where, "container_name") or ()
        kept = []
        for i, item in enumerate(items):
            if isinstance(item, dict | list):
                text(item, problems, f"{where}.container_name", i)
            else:
                kept.append(text(item, problems, f"{where}.container_name", i))
        containers = tuple(kept)
    return K8sEntry(
        pod_name=_text(obj, "pod_name", problems, where),
        namespace=_text(obj, "namespace", problems, where),
        containers=containers,
        pod_uid=_text(obj, "pod_uid", problems, where),
        claim_name=_text(obj, "claim_name", problems, where),
        claim_namespace=_text(obj, "claim_namespace", problems, where),
    )


def _k8s_table(obj: dict[str, Any], key: str, problems: Problems) -> dict[str, K8sEntry]:
    table = mapping(obj.get(key), problems, N.NEURON_K8S_INFO, key) or {}
    out: dict[str, K8sEntry] = {}
    parent = f"{N.NEURON_K8S_INFO}.{key}"
    for idx, entry in table.items():
        checked = mapping(entry, problems, parent, idx)
        if checked is not None:
            out[str(idx)] = _k8s_entry(checked, problems, f"{parent}.{idx}")
    return out


def read_k8s_info(obj: dict[str, Any]) -> K8sInfo:
    """The typed ``neuron_k8s_info`` object."""
    problems = Problems()
    where = N.NEURON_K8S_INFO
    return K8sInfo(
        period=number(obj.get(N.PERIOD), problems, where, N.PERIOD),
        cores=_k8s_table(obj, K8S_CORES, problems),
        devices=_k8s_table(obj, K8S_DEVICES, problems),
        error=_text(obj, N.ERROR, problems, where) or "",
        problems=problems,
    )


# ---- neuron_monitor.sources (what the daemon found of the driver's nodes) -----------------------------------------
LAYOUT_NONE = "none"
LAYOUT_DISCOVERED = "discovered"
LAYOUT_KNOWN_PREFIX = "known:"


@dataclass(slots=True)
class GroupSources:
    """One group's entry of ``neuron_monitor.sources``: the layout it recognized (``known:<name>``, ``discovered``
    or ``none``) and, per node family it reads (``hardware/mem_ecc_uncorrected``), whether it was found on every
    device the group reads (which devices lack it is in the group's ``error``)."""

    layout: str = LAYOUT_NONE
    found: dict[str, bool] = field(default_factory=dict)
    required: frozenset[str] = frozenset()  # the families this host must expose (check/required.py)

    @property
    def missing(self) -> list[str]:
        """The families not found (on some device), sorted."""
        return sorted(family for family, ok in self.found.items() if not ok)

    @property
    def required_missing(self) -> list[str]:
        """The required families not found, sorted: what the daemon should read here and does not."""
        return [family for family in self.missing if family in self.required]


@dataclass(slots=True)
class Sources:
    """``neuron_monitor.driver_version`` and ``neuron_monitor.sources``, typed: the driver version as read from
    ``/sys/module/neuron/version`` ("" when unreadable, None when the report does not say) and each configured
    group's `GroupSources` (groups that read no driver node are not listed)."""

    driver_version: str | None = None
    groups: dict[str, GroupSources] = field(default_factory=dict)
    problems: Problems = field(default_factory=Problems, compare=False, repr=False)


def read_sources(obj: dict[str, Any]) -> Sources:
    """The typed sources of the daemon's own ``neuron_monitor`` object (a wrong-typed value is left out and
    recorded on ``problems``)."""
    problems = Problems()
    where = N.NEURON_MONITOR
    out = Sources(driver_version=_text(obj, "driver_version", problems, where), problems=problems)
    table = mapping(obj.get("sources"), problems, where, "sources") or {}
    for name, entry in table.items():
        at = f"{where}.sources"
        checked = mapping(entry, problems, at, name)
        if checked is None:
            continue
        layout = _text(checked, "layout", problems, f"{at}.{name}") or LAYOUT_NONE
        found: dict[str, bool] = {}
        for family, ok in (mapping(checked.get("found"), problems, f"{at}.{name}", "found") or {}).items():
            if ok.__class__ is bool:
                found[str(family)] = ok
            else:
                problems.bad(f"{at}.{name}.found", family, ok, "a boolean", False)
        required = sequence(checked.get("required"), problems, f"{at}.{name}", "required") or []
        needed = frozenset(f for f in required if f.__class__ is str)
        out.groups[str(name)] = GroupSources(layout, found, needed)
    return out
