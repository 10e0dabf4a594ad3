"""Group specs: what each metric group looks like to every consumer, declared once, found without a central list.

A group's spec (``GroupSpec``) names the group, where it sits (``system_data`` or a runtime's ``report``), how its
body is read into a typed value (``read``), and what each consumer makes of that value:

* Prometheus: the families (``PromFamily``: name, type, help, label scope and extra labels) and two functions:
  ``gauges(value)`` yields the gauge samples, ``counts(value, period)`` the per-period amounts that counters
  accumulate, both in batches (maps of values, so a consumer's loop over them stays tight; ``PromSample``,
  ``PromCount``). Counter amounts are added only when the group object is fresh (each period exactly once); the
  consumer still touches the series when it is not, so it exists from the first report on.
* CloudWatch: the metrics (``CwMetric``: name or name prefix, unit, dimension scope, additive or not) and
  ``datums(value, period, per_vcpu)``, the values to send.
* The timeline: its tracks (``Track``: name, category, unit, scope, kind). The categories of the counter tracks
  are the event types ``neuron-monitor-trace --events`` accepts; the trace writer places each track by its scope.

A sample names its family/metric and a *key*: the label values after the scope's own labels. For the core
scope the key starts with the NeuronCore index (the consumer turns it into its core labels or dimensions); for
the device, vCPU and physical-core CloudWatch scopes it starts with those indexes likewise.

The registry is the package ``neuron_monitor.schema.groups``: every module in it that defines ``SPEC`` is a
group. Adding a group is adding its module there (and its collector under ``neuron_monitor.groups``).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from neuron_monitor.schema.read import Problems

T = TypeVar("T")

# where a group sits in the report
SYSTEM: Literal["system"] = "system"
RUNTIME: Literal["runtime"] = "runtime"
Placement = Literal["system", "runtime"]

# ---- Prometheus -----------------------------------------------------------------------------------------------
GAUGE = "gauge"
COUNTER = "counter"
# label scopes: which labels precede a family's own ``labels``
INSTANCE_SCOPE = "instance"  # the instance labels
RUNTIME_SCOPE = "runtime"  # + runtime_tag (+ pod labels)
CORE_SCOPE = "core"  # + runtime labels, neuroncore, neuron_device_index; the key starts with the core index


# Bounds of a possible per-period value (a consumer that accumulates counters drops a value outside them)
MAX_COUNT_PER_PERIOD = 1e12  # events in one period: 2e11/s over 5 s, far beyond any real workload or device
MAX_FLOPS = 1e18  # FLOP/s of one NeuronCore: about 10,000 times a real one
MAX_PERIOD = 86400.0  # seconds; a group period is seconds to minutes
MAX_PERCENT = 100.01  # CPU percentages are rounded to hundredths


@dataclass(frozen=True, slots=True, eq=False)
class PromFamily:
    """One Prometheus family a group produces. ``name`` is without ``_total``. Compared by identity."""

    name: str
    kind: str  # GAUGE or COUNTER
    help: str
    scope: str
    labels: tuple[str, ...] = ()
    limit: float = MAX_COUNT_PER_PERIOD  # counters: the largest possible reported value (count, rate, percent)
    drops_unlisted: bool = False  # counters: a key whose first label no sample named is dropped (device gone)


# (family, prefix, {key: value}, divisor, suffix): a batch of gauge samples. A sample's key -- the values of the
# family's own labels, after the core index for CORE_SCOPE -- is prefix + the map's key + suffix (for a family
# without a key -- no labels, not the core scope -- prefix + suffix, the map holding one value); its value is the
# map's value / divisor.
PromSample = tuple[PromFamily, tuple[str, ...], Mapping[str, float], float, tuple[str, ...]]
# (family, key prefix, {last key value: reported value}, factor): a batch of counter samples. Each counter's key is
# the prefix plus the map's key (for a family without a key -- no labels, not the core scope -- the prefix alone);
# it grows by value x factor when the group is fresh, the value (a count, a rate, a percentage) checked against
# ``family.limit`` first.
PromCount = tuple[PromFamily, tuple[str, ...], Mapping[str, float], float]

# ---- CloudWatch -----------------------------------------------------------------------------------------------
PERCENT = "Percent"
BYTES = "Bytes"
COUNT = "Count"
COUNT_PER_SECOND = "Count/Second"
SECONDS = "Seconds"
# dimension scopes; the key's leading values are the scope's indexes
HOST_DIMS = "host"  # InstanceId, InstanceType (or the container-insights set)
RUNTIME_DIMS = "runtime"  # + RuntimeTag
CORE_DIMS = "core"  # + NeuronDevice, NeuronCore (+ pod owner): key = (core,)
PHYSICAL_CORE_DIMS = "physical_core"  # core dimensions + PhysicalNeuronCore: key = (core, physical core)
DEVICE_DIMS = "device"  # + NeuronDevice (+ pod owner): key = (device,)
VCPU_DIMS = "vcpu"  # + VCpu: key = (vcpu,)


@dataclass(frozen=True, slots=True)
class CwMetric:
    """One CloudWatch metric, or a set of them when ``keyed``: then the datum's suffix is appended in CamelCase
    (``Execution`` + ``completed_with_err`` -> ``ExecutionCompletedWithErr``)."""

    name: str
    unit: str
    scope: str
    keyed: bool = False
    additive: bool = True  # two datums of one series in one report: summed, else sent as two samples


# (metric, key, suffix ("" unless keyed), value)
CwDatum = tuple[CwMetric, tuple[str, ...], str, float]

# ---- the timeline ---------------------------------------------------------------------------------------------
CORE_TRACK = "neuroncore"
DEVICE_TRACK = "device"
RUNTIME_TRACK = "runtime"
HOST_TRACK = "host"
COUNTER_TRACK = "counter"
SLICE_TRACK = "slices"


@dataclass(frozen=True, slots=True)
class Track:
    """One track of the timeline: its name (after the place prefix), category (the event type users select with
    ``--events``), unit, scope, and kind (a counter, or slices such as error episodes)."""

    name: str
    category: str
    unit: str
    scope: str
    kind: str = COUNTER_TRACK


# (track, key, {series: value}): one counter sample of a spec's own timeline track. The key holds the scope's index
# (the NeuronCore or device index for those scopes, nothing for the host and runtime scopes).
TimelineSample = tuple[Track, tuple[str, ...], Mapping[str, float]]


# ---- the spec -------------------------------------------------------------------------------------------------
def _none(*_: Any) -> Iterable[Any]:
    return ()


@dataclass(frozen=True)
class GroupSpec(Generic[T]):
    """Everything a consumer needs to know about one metric group."""

    name: str
    placement: Placement
    read: Callable[[dict[str, Any], str, Problems], T]  # (body, its path, problems) -> typed value
    doc: str = ""
    partial_errors: bool = False  # an ``error`` may describe a partial failure with valid data beside it
    prometheus: tuple[PromFamily, ...] = ()
    gauges: Callable[[T], Iterable[PromSample]] = _none
    counts: Callable[[T, float], Iterable[PromCount]] | None = None  # (value, period); None: feeds no counter
    counts_use_period: bool = False  # the counts are rates or shares scaled by the period (checked first)
    cloudwatch: tuple[CwMetric, ...] = ()
    datums: Callable[[T, float, bool], Iterable[CwDatum]] = _none  # (value, period, per_vcpu)
    tracks: tuple[Track, ...] = ()
    # the values of the group's tracks, for groups the timeline does not place by hand (every group added after
    # the first seven): the trace writer puts each at its scope's place (host, runtime, core, device)
    timeline: Callable[[T], Iterable[TimelineSample]] | None = None
    families_by_name: dict[str, PromFamily] = field(default_factory=dict, compare=False)
    dropping: tuple[PromFamily, ...] = field(default=(), compare=False)  # the counters with ``drops_unlisted``

    def __post_init__(self) -> None:
        self.families_by_name.update((f.name, f) for f in self.prometheus)
        object.__setattr__(self, "dropping", tuple(f for f in self.prometheus if f.drops_unlisted))

    def family(self, name: str) -> PromFamily:
        return self.families_by_name[name]


@dataclass(frozen=True)
class Registry:
    """Every known group spec, by placement and name (in the order of their module names)."""

    system: dict[str, GroupSpec[Any]]
    runtime: dict[str, GroupSpec[Any]]

    def all(self) -> list[GroupSpec[Any]]:
        return [*self.system.values(), *self.runtime.values()]

    def get(self, name: str) -> GroupSpec[Any] | None:
        return self.system.get(name) or self.runtime.get(name)


@functools.cache
def registry() -> Registry:
    """The specs of ``neuron_monitor.schema.groups``: each module there defining ``SPEC`` is one group."""
    from neuron_monitor.schema import groups

    system: dict[str, GroupSpec[Any]] = {}
    runtime: dict[str, GroupSpec[Any]] = {}
    for info in sorted(pkgutil.iter_modules(groups.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{groups.__name__}.{info.name}")
        spec = getattr(module, "SPEC", None)
        if isinstance(spec, GroupSpec):
            (system if spec.placement == SYSTEM else runtime)[spec.name] = spec
    return Registry(system, runtime)


@functools.cache
def _counter_families() -> dict[str, PromFamily]:
    return {f.name: f for spec in registry().all() for f in spec.prometheus if f.kind == COUNTER}


def counter_family(name: str) -> PromFamily | None:
    """The counter family of any group spec by name (a consumer's ledger keys start with it)."""
    return _counter_families().get(name)
