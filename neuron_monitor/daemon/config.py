"""monitor.conf, AWS's format unchanged: models, period parsing, period inheritance, validation messages.

Reads a JSON file (or nothing: every group at 5 s for every application) and returns a `Plan`: the list of
(scope, group, period) units the scheduler runs. Every mistake becomes one `ConfigError` line naming the file,
the JSON path and the problem. Unknown keys are rejected (a typo such as "perod" would otherwise silently run
everything at the default period); the vestigial Neuron 1.x runtime key "address" is accepted and ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from neuron_monitor.daemon.config_values import ConfigError, json_type, parse_period
from neuron_monitor.daemon.tagmatch import TagFilter, compile_tag_filter
from neuron_monitor.groups.registry import RUNTIME_GROUPS, SYSTEM_GROUPS
from neuron_monitor.util.inputfile import CONFIG_MAX_BYTES, InputFileError, read_regular, shown

DEFAULT_PERIOD = 5.0


@dataclass(frozen=True)
class RuntimeScope:
    """One ``neuron_runtimes`` entry: which applications, which groups at which periods."""

    index: int
    tag_filter: TagFilter
    groups: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Plan:
    """The resolved configuration: what to collect and how often."""

    source: str
    system_groups: tuple[tuple[str, float], ...]
    runtime_scopes: tuple[RuntimeScope, ...]
    root_period: float = DEFAULT_PERIOD
    # keyword options of a group's constructor, by group name, from the command line (e.g. the health group's
    # state_dir from --state-dir): not from monitor.conf, whose format stays AWS's; a group that is not in the
    # lists ignores its options
    group_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, hash=False)

    def options_of(self, name: str) -> Mapping[str, Any]:
        """The keyword options ``name``'s collector is built with (none: an empty mapping)."""
        return self.group_options.get(name, {})

    def smallest_period(self) -> float:
        periods = [p for _, p in self.system_groups]
        periods += [p for s in self.runtime_scopes for _, p in s.groups]
        return min(periods) if periods else DEFAULT_PERIOD

    def enables_no_group(self) -> bool:
        """True when the lists name no metric group at all (reports then carry only the top-level sections)."""
        return not self.system_groups and not any(s.groups for s in self.runtime_scopes)

    def same_as(self, other: Plan) -> bool:
        """True when ``other`` would collect exactly the same (a reload of an unchanged file changes nothing)."""

        def key(p: Plan) -> tuple[Any, ...]:
            scopes = tuple((s.index, s.tag_filter.pattern, s.groups) for s in p.runtime_scopes)
            options = tuple(sorted((name, tuple(sorted(o.items()))) for name, o in p.group_options.items()))
            return (p.root_period, p.system_groups, scopes, options)

        return key(self) == key(other)

    def scope_for_tag(self, tag: str) -> RuntimeScope | None:
        """The first entry whose tag_filter matches (search semantics, like Go's regexp.MatchString)."""
        for scope in self.runtime_scopes:
            if scope.tag_filter.search(tag):
                return scope
        return None


NO_GROUP_WARNING = (
    "this configuration enables no metric group: reports will carry no system_data and no runtimes"
    " (name groups under system_metrics or neuron_runtimes[].metrics, or leave both keys out for every group)"
)


def plan_warnings(plan: Plan) -> list[str]:
    """Problems that do not stop the daemon but that the user should hear about, each one line naming the file."""
    return [f"{plan.source}: {NO_GROUP_WARNING}"] if plan.enables_no_group() else []


def default_plan() -> Plan:
    """No configuration file: every group at 5 s for every application (AWS's documented default)."""
    return _every_group("(defaults)", DEFAULT_PERIOD)


def _every_group(source: str, period: float) -> Plan:
    return Plan(
        source=source,
        system_groups=tuple((g, period) for g in SYSTEM_GROUPS),
        runtime_scopes=(RuntimeScope(0, compile_tag_filter(".*"), tuple((g, period) for g in RUNTIME_GROUPS)),),
        root_period=period,
    )


def _check_types(
    types: list[str], known: tuple[str, ...], other: tuple[str, ...], where: str, other_where: str
) -> None:
    seen: set[str] = set()
    for i, typ in enumerate(types):
        path = f"{where}[{i}].type"
        if typ in other:
            raise ValueError(f'{path}: "{typ}" is a {other_where} group and belongs there')
        if typ not in known:
            raise ValueError(f'{path}: unknown metric group "{typ}" (known: {", ".join(known)})')
        if typ in seen:
            raise ValueError(f'{path}: metric group "{typ}" is listed twice')
        seen.add(typ)


def plan_from_data(data: Any, source: str) -> Plan:
    """Validate parsed JSON and resolve periods (metric > neuron_runtimes entry > root > 5 s).

    A well-formed configuration takes `plan_from_data_fast` (plain Python); anything it does not accept — every
    mistake included — goes through `plan_from_data_careful` (the pydantic models, imported only then), which
    names the problem. tests/test_config_fast.py checks the two give the same plans. A new validation rule goes
    into both (the fast path must return None wherever the careful one rejects), with a case in that test."""
    plan = plan_from_data_fast(data, source)
    return plan if plan is not None else plan_from_data_careful(data, source)


def plan_from_data_careful(data: Any, source: str) -> Plan:
    """`plan_from_data` through the pydantic models: the reference, and the path that words every error."""
    # imported on this path only, so a well-formed configuration never loads pydantic (docs/performance.md);
    # config_models imports config_values, not this module: no import circle
    from neuron_monitor.daemon.config_models import validate

    cfg = validate(data, source)
    try:
        _check_types(
            [m.type for m in cfg.system_metrics], SYSTEM_GROUPS, RUNTIME_GROUPS, "system_metrics", "neuron_runtimes"
        )
        for i, rt in enumerate(cfg.neuron_runtimes):
            _check_types(
                [m.type for m in rt.metrics],
                RUNTIME_GROUPS,
                SYSTEM_GROUPS,
                f"neuron_runtimes[{i}].metrics",
                "system_metrics",
            )
    except ValueError as e:
        raise ConfigError(f"{source}: {e}") from None
    root_period = parse_period(cfg.period) if cfg.period else DEFAULT_PERIOD
    if not {"neuron_runtimes", "system_metrics"} & cfg.model_fields_set:
        # only a period (or an empty object): every group at that period, the same set as no file at all
        return _every_group(source, root_period)
    system = tuple((m.type, parse_period(m.period) if m.period else root_period) for m in cfg.system_metrics)
    scopes = []
    for i, rt in enumerate(cfg.neuron_runtimes):
        rt_period = parse_period(rt.period) if rt.period else root_period
        groups = tuple((m.type, parse_period(m.period) if m.period else rt_period) for m in rt.metrics)
        scopes.append(RuntimeScope(i, compile_tag_filter(rt.tag_filter), groups))
    return Plan(source=source, system_groups=system, runtime_scopes=tuple(scopes), root_period=root_period)


_ROOT_KEYS = frozenset(("period", "neuron_runtimes", "system_metrics"))
_RUNTIME_KEYS = frozenset(("tag_filter", "period", "metrics", "address"))
_METRIC_KEYS = frozenset(("type", "period"))


def _period_or(v: Any, default: float) -> float | None:
    """A period value as the models take it: None/absent/"" -> ``default``; a valid duration string -> seconds;
    anything else -> None (not for the fast path)."""
    if v is None:
        return default
    if type(v) is not str:
        return None
    try:
        seconds = parse_period(v)
    except ValueError:
        return None
    return seconds if v else default


def _metrics_fast(items: Any, default: float) -> tuple[list[str], list[tuple[str, float]]] | None:
    if type(items) is not list:
        return None
    types: list[str] = []
    out: list[tuple[str, float]] = []
    for m in items:
        if type(m) is not dict or not m.keys() <= _METRIC_KEYS or type(m.get("type")) is not str:
            return None
        period = _period_or(m.get("period"), default)
        if period is None:
            return None
        types.append(m["type"])
        out.append((m["type"], period))
    return types, out


def plan_from_data_fast(data: Any, source: str) -> Plan | None:
    """`plan_from_data` in plain Python for a well-formed configuration (JSON types exactly as the models want
    them, no unknown key, valid periods and regular expressions); None for anything else, which the careful twin
    then rejects with its message (or, should the two ever disagree on acceptance, accepts). Saves importing
    pydantic and building its models at start-up (figures in docs/performance.md)."""
    if type(data) is not dict or not data.keys() <= _ROOT_KEYS:
        return None
    root_period = _period_or(data.get("period"), DEFAULT_PERIOD)
    if root_period is None:
        return None
    system = _metrics_fast(data.get("system_metrics", []), root_period)
    runtimes = data.get("neuron_runtimes", [])
    if system is None or type(runtimes) is not list:
        return None
    scopes: list[tuple[list[str], RuntimeScope]] = []
    for i, rt in enumerate(runtimes):
        if type(rt) is not dict or not rt.keys() <= _RUNTIME_KEYS:
            return None
        tag_filter = rt.get("tag_filter", ".*")
        address = rt.get("address")
        if type(tag_filter) is not str or (address is not None and type(address) is not str):
            return None
        try:
            pattern = compile_tag_filter(tag_filter)
        except ValueError:
            return None
        rt_period = _period_or(rt.get("period"), root_period)
        metrics = _metrics_fast(rt.get("metrics", []), rt_period) if rt_period is not None else None
        if metrics is None:
            return None
        scopes.append((metrics[0], RuntimeScope(i, pattern, tuple(metrics[1]))))
    try:
        _check_types(system[0], SYSTEM_GROUPS, RUNTIME_GROUPS, "system_metrics", "neuron_runtimes")
        for i, (types, _) in enumerate(scopes):
            _check_types(types, RUNTIME_GROUPS, SYSTEM_GROUPS, f"neuron_runtimes[{i}].metrics", "system_metrics")
    except ValueError:
        return None
    if not {"neuron_runtimes", "system_metrics"} & data.keys():
        return _every_group(source, root_period)
    return Plan(
        source=source,
        system_groups=tuple(system[1]),
        runtime_scopes=tuple(s for _, s in scopes),
        root_period=root_period,
    )


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {shown(key)} (JSON objects in this file must not repeat a key)")
        out[key] = value
    return out


def parse_json_strict(raw: bytes, name: str) -> Any:
    """Parse configuration JSON: RFC 8259 (orjson: no NaN, nesting bounded), and no object repeats a key."""
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise ConfigError(f"{name}: invalid JSON: {str(e)[:160]}") from None
    try:
        return json.loads(raw, object_pairs_hook=_no_duplicate_keys)
    except ValueError as e:
        raise ConfigError(f"{name}: invalid JSON: {e}") from None
    except RecursionError:
        raise ConfigError(f"{name}: invalid JSON: nested too deeply") from None


def load_plan(path: str | None) -> Plan:
    """Load a config file into a Plan; ``None`` gives the documented defaults.

    The file must be a regular file of at most CONFIG_MAX_BYTES (see inputfile.py): a FIFO or a device is refused
    at once instead of blocking or filling memory."""
    if path is None:
        return default_plan()
    name = str(path)
    try:
        raw = read_regular(path, CONFIG_MAX_BYTES, name)
    except InputFileError as e:
        raise ConfigError(str(e)) from None
    if not raw.strip():
        raise ConfigError(f"{name}: file is empty (expected a JSON object)")
    data = parse_json_strict(raw, name)
    if not isinstance(data, dict):
        raise ConfigError(f"{name}: (root): expected a JSON object, got {json_type(data)}")
    return plan_from_data(data, name)
