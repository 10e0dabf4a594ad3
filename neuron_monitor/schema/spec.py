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
* The timeline: its tracks (``Track``: name, category, unit, scope, kind, timing) and ``timeline(value)``, their
  samples. The categories of the counter tracks are the event types ``neuron-monitor-trace --events`` accepts;
  the trace writer places each sample by its track's scope, summing a runtime group's core and device samples
  over the runtimes.
* Values derived across runtimes (``RuntimeSum``: a NeuronCore's utilization summed over the runtimes on it),
  used alike by the Prometheus exporter, the timeline and ``neuron-monitor-top``.
* neuron-monitor-det: the problems the group shows (``DetRule``: type, scope, severity, message, episode kind)
  and ``findings(value)``, what one fresh group object says for them.
* What a runtime group tells about its runtime (``RuntimeFacts``: the cores it works on, its loaded models, its
  NeuronCores' utilization, its executions), from ``runtime_facts(value, fresh_period, cores_per_device)``:
  neuron-monitor-det's own inferences (a hang, a vanished runtime) and the trace's runtime slices use them.
* neuron-monitor-top: its columns (``TopColumn``: table, header, width, order) and ``top(value, period)``, the
  cells of one report.

A sample names its family/metric and a *key*: the label values after the scope's own labels. For the core
scope the key starts with the NeuronCore index (the consumer turns it into its core labels or dimensions); for
the device, vCPU and physical-core CloudWatch scopes it starts with those indexes likewise.

The registry is the package ``neuron_monitor.groups``: every folder in it with a ``spec.py`` that defines ``SPEC``
is a group. Adding a group is adding its folder there (the spec beside its collector, ``collector.py``).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Generic, Literal, NamedTuple, TypeVar

from neuron_monitor import groups
from neuron_monitor.schema.values import Problems

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


@dataclass(frozen=True, slots=True)
class Budget:
    """What a family keeps under the Prometheus exporter's default series budget (``--series-detail budget``;
    ``--series-detail full`` serves every series). ``FULL`` keeps all; ``DETAIL`` serves the family only with full
    detail; ``only`` keeps the samples whose label ``label`` has one of these values; ``nonzero`` serves a series
    from the first report in which it is not zero on (a category that never held memory stays out; a counter of a
    kind that never counted). A counter served so is born at its first count: ``increase()`` over it misses that
    first count, so whatever reads one counts a series' first appearance too (docs/fleet.md)."""

    served: bool = True
    label: str = ""
    only: frozenset[str] = frozenset()
    nonzero: bool = False


FULL = Budget()
DETAIL = Budget(served=False)


def only(label: str, *values: str) -> Budget:
    """A budget that keeps the samples whose ``label`` is one of ``values``."""
    return Budget(label=label, only=frozenset(values))


NONZERO = Budget(nonzero=True)


@dataclass(frozen=True, slots=True)
class OtelName:
    """What a family is under ``neuron-monitor-otlp --naming otel`` where an OpenTelemetry semantic convention
    covers it (``hw.errors``, ``hw.status`` ...); a family without one gets the exporter's generic name."""

    name: str  # the convention's metric name
    unit: str = ""  # its UCUM unit ("{error}", "1" ...)
    labels: tuple[tuple[str, str], ...] = ()  # (family label, attribute name) where the convention names one
    values: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()  # (label, ((value, convention's value) ...))
    updown: bool = False  # a gauge the convention makes an UpDownCounter (a non-monotonic cumulative sum)


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
    budget: Budget = FULL  # what the exporter's default series budget keeps (see ``Budget``)
    created: bool = False  # counters: a ``<name>_created`` sample per series with ``--created-series``
    otel: OtelName | None = None  # neuron-monitor-otlp --naming otel: its semantic convention, where one exists


class PromSample(NamedTuple):
    """A batch of gauge samples of one family. A sample's key -- the values of the family's own labels, after the
    core index for CORE_SCOPE -- is ``prefix`` + the map's key + ``suffix`` (for a family without a key -- no labels,
    not the core scope -- ``prefix`` + ``suffix``, the map holding one value); its value is the map's value /
    ``divisor``."""

    family: PromFamily
    prefix: tuple[str, ...]
    values: Mapping[str, float]
    divisor: float
    suffix: tuple[str, ...]


class PromCount(NamedTuple):
    """A batch of counter samples of one family. Each counter's key is ``prefix`` plus the map's key (for a family
    without a key -- no labels, not the core scope -- ``prefix`` alone); it grows by the map's value x ``factor``
    when the group is fresh, the value (a count, a rate, a percentage) checked against ``family.limit`` first."""

    family: PromFamily
    prefix: tuple[str, ...]
    values: Mapping[str, float]
    factor: float


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
    # names of dimensions whose values are the datum's key, after the scope's own (a host-scope metric of a
    # group keyed by something no scope knows, such as an EFA adapter and port: ("device", "port"))
    key_dims: tuple[str, ...] = ()


# (metric, key, suffix ("" unless keyed), value)
CwDatum = tuple[CwMetric, tuple[str, ...], str, float]

# ---- the timeline ---------------------------------------------------------------------------------------------
CORE_TRACK = "neuroncore"
DEVICE_TRACK = "device"
RUNTIME_TRACK = "runtime"
HOST_TRACK = "host"
COUNTER_TRACK = "counter"
SLICE_TRACK = "slices"
# when a counter track's sample is written
PERIOD = "period"  # a rate over the group's period: when the group is fresh, placed at the period's start
FRESH = "fresh"  # when the group is fresh, at the report's time
ALWAYS = "always"  # a level (memory): in every report where the group is usable, at the report's time


@dataclass(frozen=True, slots=True)
class Track:
    """One track of the timeline: its name (after the place prefix), category (the event type users select with
    ``--events``), unit, scope, and kind (a counter, or slices such as error episodes).

    How the trace writer places its samples (``GroupSpec.timeline``): a host track in the instance's process; a
    runtime track of a runtime group per runtime (prefixed with the runtime's name, or in the runtime's own
    process with ``--group-by process``); a core or device track of a system group at that core or device. The
    samples of a runtime group's core and device tracks are *summed over the runtimes* per NeuronCore or device
    (a core's utilization is the sum of what each runtime on it reports), and with ``--group-by process`` each
    runtime's own samples go to its process (``per_runtime``). A summed track's place drops to 0 when no runtime
    reports it any more."""

    name: str
    category: str
    unit: str
    scope: str
    kind: str = COUNTER_TRACK
    when: str = FRESH  # PERIOD, FRESH or ALWAYS
    per_second: bool = False  # the samples are counts over the period: divided by it (needs a positive period)
    digits: int | None = None  # written values rounded to this many decimals (after the sum and the division)
    from_cores: bool = False  # device scope: samples keyed by NeuronCore, summed per device (per NeuronCore when
    # the trace is grouped by NeuronCore)
    per_runtime: bool = True  # runtime groups' core/device tracks: also each runtime's own, with --group-by process
    host: bool = False  # host data (CPU, host memory): left out by ``--ignore-host``
    integer: bool = False  # whole numbers (bytes): sums over runtimes, and the 0 a gone place drops to, stay ints


# (track, key, {series: value}): one counter sample of a spec's own timeline track. The key holds the scope's index
# (the NeuronCore or device index for those scopes, nothing for the host and runtime scopes).
TimelineSample = tuple[Track, tuple[str, ...], Mapping[str, float]]


def sum_over_runtimes(
    per_runtime: Iterable[Mapping[str, Mapping[str, float]]], integer: bool = False
) -> dict[str, dict[str, float]]:
    """{key: {series: value}} of each runtime -> the sums per key and series, added in runtime order from 0.0 (0 for
    ``integer`` values), so every consumer gets the same floating-point result; series sorted by name. A key with
    no series still appears (empty). The one definition of a value derived across runtimes (``RuntimeSum``)."""
    zero: float = 0 if integer else 0.0
    sums: dict[str, dict[str, float]] = {}
    for values in per_runtime:
        for key, series in values.items():
            acc = sums.get(key)
            if acc is None:
                acc = sums[key] = {}
            for name, v in series.items():
                acc[name] = acc.get(name, zero) + v
    return {key: dict(sorted(acc.items())) for key, acc in sums.items()}


@dataclass(frozen=True, slots=True)
class RuntimeSum:
    """A value derived across runtimes: summed per NeuronCore over every runtime that reports the core (a core's
    utilization when several runtimes share it). Declared once in the runtime group's spec; the Prometheus
    exporter sums the ``source`` family's samples into ``total`` (instance labels + ``neuroncore``), the timeline
    sums ``track`` per core, ``neuron-monitor-top`` sums ``values`` (``sum_over_runtimes``)."""

    name: str
    values: Callable[[Any], Mapping[str, Mapping[str, float]]]  # a runtime's typed value -> {core: {series: v}}
    source: PromFamily | None = None  # the per-runtime gauge family (core scope) whose samples are summed
    total: PromFamily | None = None  # the summed family (instance scope, label ``neuroncore``)
    track: Track | None = None
    integer: bool = False  # whole numbers (bytes): summed as ints
    # the default Prometheus series budget serves ``total`` only for the cores more than one runtime reports in
    # ``source`` (for a core one runtime holds, the total equals that runtime's own series)
    shared_only: bool = False
    top: str = ""  # what neuron-monitor-top draws from it: TOP_CORE_UTILIZATION, TOP_CORE_PHYSICAL, TOP_CORE_MEMORY
    # the known series in the order a consumer shows them (top's memory bar runs; the utilization sum's first series is
    # the one top draws)
    series: tuple[str, ...] = ()


# ---- what a runtime group tells about its runtime -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RuntimeFacts:
    """What one runtime group object says about its runtime, for what no single group shows: neuron-monitor-det's
    own inferences (a hang: models loaded, every NeuronCore at 0 %, no execution; a runtime that vanished) and the
    trace's runtime slices. A field the group does not know stays None; the timeline takes each field from the
    first of a runtime's groups (in timeline order) that knows it. NeuronCore indexes are global (device x cores
    per device + core)."""

    cores_in_use: frozenset[int] | None = None  # the NeuronCores the runtime reports activity for
    memory_cores: frozenset[int] | None = None  # the NeuronCores on which it holds any memory
    model_cores: frozenset[int] | None = None  # the NeuronCores its loaded models run on
    models: int | None = None  # how many models it has loaded
    utilization: Mapping[int, float] | None = None  # NeuronCore -> percent (the latest, fresh or carried over)
    utilization_period: float | None = None  # the utilization's period (seconds) when the object is fresh
    executions: int | None = None  # executions that ended in the period, when the object is fresh

    def cores(self) -> tuple[int, ...]:
        """The NeuronCores the runtime works on: where its models run; else where it holds memory; else in use."""
        chosen = self.model_cores or self.memory_cores or self.cores_in_use or ()
        return tuple(sorted(chosen))


NO_FACTS = RuntimeFacts()
_FACT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(RuntimeFacts))


def merge_facts(facts: Iterable[RuntimeFacts]) -> RuntimeFacts:
    """Each field from the first of ``facts`` that knows it (is not None)."""
    merged: dict[str, Any] = {}
    for one in facts:
        for name in _FACT_FIELDS:
            if name not in merged and getattr(one, name) is not None:
                merged[name] = getattr(one, name)
    return RuntimeFacts(**merged) if merged else NO_FACTS


def _no_facts(*_: Any) -> RuntimeFacts:
    return NO_FACTS


# ---- neuron-monitor-det -----------------------------------------------------------------------------------------
ERROR = "error"
WARNING = "warning"
# how a rule's findings make a problem's time range
COUNT_EPISODES = "count"  # per-period counts: an episode opens at the first fresh period with a non-zero count,
# spans the following ones, and ends at the first clean period (after the merge gap); numbers in the details add up
STATE_EPISODES = "state"  # a condition: open from the first report where it holds to the first where it does not;
# the names in the details are listed, comma-separated, in the order first seen
GROUP_PERIOD = "group_period"  # a count covers the group's period
SINCE_LAST_REPORT = "since_last_report"  # a count covers the time since the instance's previous report


@dataclass(frozen=True, slots=True)
class DetRule:
    """One problem neuron-monitor-det reports from a group: its type (an event type of ``--events``, in its
    ``errors`` set), the subject's scope (``RUNTIME_TRACK``: a runtime, ``DEVICE_TRACK``: a Neuron device,
    ``HOST_TRACK``: something of the host the finding's key names, such as an EFA device),
    severity, a one-line message (``neuron-monitor-det --rules``), how findings make episodes, and whether the
    trace shows the episodes as slices (on the runtime's or device's error thread)."""

    kind: str
    scope: str
    severity: str
    message: str
    episode: str = COUNT_EPISODES
    span: str = GROUP_PERIOD
    trace_slices: bool = True


# (rule, key, amount, details): what one fresh group object says for a rule. The key is (device index,) for the
# device scope, () for the runtime scope, (subject name,) for the host scope (the problem's subject text). The
# amount is the period's count (COUNT_EPISODES) or, for STATE_EPISODES, > 0 while the condition holds (0 ends the
# episode). Details: numbers added up over the episode, or for a state rule {name: [names]}. An open count episode
# of this group and subject that gets no finding sees a count of 0.
DetFinding = tuple[DetRule, tuple[str, ...], float, Mapping[str, Any]]

# ---- neuron-monitor-top ---------------------------------------------------------------------------------------
TOP_RUNTIMES = "runtimes"  # the runtimes table: one cell per runtime, key ()
TOP_DEVICES = "devices"  # the devices table: one cell per device, key (device index,)
TOP_HOST = "host"  # the host line: one bar per column
# what neuron-monitor-top draws from a RuntimeSum (``RuntimeSum.top``): the core/device utilization bars (the sum's
# "percent" series), the physical cores' bars, the core/device memory (every series, bytes)
TOP_CORE_UTILIZATION = "core_utilization"
TOP_CORE_PHYSICAL = "core_physical"
TOP_CORE_MEMORY = "core_memory"


@dataclass(frozen=True, slots=True)
class TopColumn:
    """One column of a neuron-monitor-top table: header, width, alignment (``<``/``>``), its place among the
    table's columns (``order``, lower first), the narrowest terminal that shows it (``min_width``), the spaces
    after it (device table; runtime cells are followed by one), whether the devices table shows it when no
    device has a value (``always``). A cell whose text is wider than its column keeps it whole; the device row's
    trailing memory-category columns are then left out."""

    panel: str
    header: str
    width: int
    order: int
    align: str = ">"
    min_width: int = 0
    gap: int = 0
    always: bool = False
    missing: str = "-"  # the text of a missing cell (host bars: the text after an empty bar)
    history: str = ""  # host bars: the label of the bar's full-width history graph ("": none)


# (column, key, text, style): one cell. Style is a Rich style string ("" for none).
TopCell = tuple[TopColumn, tuple[str, ...], str, str]
# (column, label, percent, text): one bar of the host line: its label (the column's header when the group is
# absent), how full the bar is (None: empty), the text after it.
TopBar = tuple[TopColumn, str, float | None, str]


class TopModel(NamedTuple):
    """One model a runtime has loaded, for neuron-monitor-top's models view."""

    name: str
    model_id: str
    running: bool
    device_bytes: int
    host_bytes: int
    cores: tuple[int, ...]  # NeuronCores its subgraphs run on, numbered across the host (device * per device + core)


def _no_models(_: Any, cores_per_device: int) -> Sequence[TopModel] | None:
    return None


def _no_power(_: Any) -> Mapping[int, float]:
    return {}


def _no_details(_: Any) -> Mapping[int, Sequence[str]]:
    return {}


# ---- the spec -------------------------------------------------------------------------------------------------
def _none(*_: Any) -> Iterable[Any]:
    return ()


# A part of a group's body that its ``read`` and ``counts`` never look at when a report is only counted (what
# ``GroupSpec.uncounted`` names): a path of steps from the body, each (key names, negated): a member is followed when
# its key is one of the names (negated: none of them; () negated: any key); the values the last step reaches are the
# part. neuron-monitor-prometheus decodes those values as null in a long report it only counts
# (exporters/prometheus/counting.py, ``thin_native``); its equivalence test counts mutated lines both ways.
UncountedStep = tuple[tuple[str, ...], bool]


@dataclass(frozen=True)
class GroupSpec(Generic[T]):
    """Everything a consumer needs to know about one metric group."""

    name: str
    placement: Placement
    read: Callable[[dict[str, Any], str, Problems], T]  # (body, its path, problems) -> typed value
    doc: str = ""
    partial_errors: bool = False  # an ``error`` may describe a partial failure with valid data beside it
    # the start of the ``error`` a group writes when the host has none of its source (no EFA adapter): an empty
    # body that is a fact about the host, not a failure (the exporter's group_success stays 1)
    absent_error: str = ""
    prometheus: tuple[PromFamily, ...] = ()
    gauges: Callable[[T], Iterable[PromSample]] = _none
    counts: Callable[[T, float], Iterable[PromCount]] | None = None  # (value, period); None: feeds no counter
    counts_use_period: bool = False  # the counts are rates or shares scaled by the period (checked first)
    cloudwatch: tuple[CwMetric, ...] = ()
    datums: Callable[[T, float, bool], Iterable[CwDatum]] = _none  # (value, period, per_vcpu)
    tracks: tuple[Track, ...] = ()
    # the values of the group's tracks: the trace writer puts each at its scope's place (host, runtime, core,
    # device), summing a runtime group's core and device samples over the runtimes
    timeline: Callable[[T], Iterable[TimelineSample]] | None = None
    timeline_order: int = 100  # where the group's samples come among those of one place (lower first, then name)
    sums: tuple[RuntimeSum, ...] = ()  # values derived across runtimes (runtime groups)
    # runtime groups: what the object says about its runtime ((value, its period when fresh else None, NeuronCores
    # per device)): its cores, models, utilization, executions (``RuntimeFacts``)
    runtime_facts: Callable[[T, float | None, int], RuntimeFacts] = _no_facts
    # neuron-monitor-det: the problems the group can show, and what one fresh group object says for them
    det_rules: tuple[DetRule, ...] = ()
    findings: Callable[[T], Iterable[DetFinding]] = _none
    # neuron-monitor-top: the group's columns, and its cells of one report ((value, the group's period))
    top_columns: tuple[TopColumn, ...] = ()
    top: Callable[[T, float | None], Iterable[TopCell]] = _none
    top_bars: Callable[[T], Iterable[TopBar]] = _none  # the group's bars of the host line (TOP_HOST columns)
    # the models a runtime has loaded (the models view); None when the group lists none
    top_models: Callable[[T, int], Sequence[TopModel] | None] = _no_models  # (value, cores_per_device)
    # device index -> the period's average power (percent of the device's maximum): the devices' power history
    top_device_power: Callable[[T], Mapping[int, float]] = _no_power
    # system groups: how many Neuron devices the object lists (the Prometheus exporter's readiness on a host whose
    # hardware info gives no device count); None: the group lists none
    device_count: Callable[[T], int] | None = None
    # the part of the body counting never reads (see ``UncountedStep``); (): all of it is read
    uncounted: tuple[UncountedStep, ...] = ()
    # device index -> the whole story behind the device's health cell (a verdict's every reason), shown for the
    # device under neuron-monitor-top's selection cursor
    top_device_details: Callable[[T], Mapping[int, Sequence[str]]] = _no_details
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
    """The specs of ``neuron_monitor.groups``: each folder there whose ``spec.py`` defines ``SPEC`` is one group."""
    system: dict[str, GroupSpec[Any]] = {}
    runtime: dict[str, GroupSpec[Any]] = {}
    for info in sorted(pkgutil.iter_modules(groups.__path__), key=lambda m: m.name):
        if not info.ispkg or importlib.util.find_spec(f"{groups.__name__}.{info.name}.spec") is None:
            continue
        module = importlib.import_module(f"{groups.__name__}.{info.name}.spec")
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


@functools.cache
def family_budgets() -> dict[str, Budget]:
    """The budget of every spec family that the default series budget thins (see ``Budget``), by family name."""
    return {f.name: f.budget for spec in registry().all() for f in spec.prometheus if f.budget is not FULL}
