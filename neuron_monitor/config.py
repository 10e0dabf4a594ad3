"""monitor.conf, AWS's format unchanged: models, period parsing, period inheritance, validation messages.

Reads a JSON file (or nothing: every group at 5 s for every application) and returns a `Plan`: the list of
(scope, group, period) units the scheduler runs. Every mistake becomes one `ConfigError` line naming the file,
the JSON path and the problem. Unknown keys are rejected (a typo such as "perod" would otherwise silently run
everything at the default period); the vestigial Neuron 1.x runtime key "address" is accepted and ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from pydantic_core import ErrorDetails

from neuron_monitor.groups import RUNTIME_GROUPS, SYSTEM_GROUPS

DEFAULT_PERIOD = 5.0
MIN_PERIOD = 0.01
MAX_PERIOD = 86400.0

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


class ConfigError(Exception):
    """A bad configuration; ``str()`` is the one line printed to stderr."""


def parse_period(text: str) -> float:
    """Parse a Go-style duration ("500ms", "1s", "2m", "1m30s") into seconds; raise ValueError if invalid."""
    if not isinstance(text, str):
        raise ValueError(f'expected a duration string such as "500ms", "1s" or "2m", got {text!r}')
    s = text.strip()
    if not s:
        raise ValueError("empty duration")
    if s.startswith("-"):
        raise ValueError(f"period must be positive, got {text!r}")
    s = s.lstrip("+")
    pos = 0
    total = 0.0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if not m:
            raise ValueError(
                f'invalid duration {text!r}: expected a number and a unit (ns, us, ms, s, m, h), e.g. "1s"'
            )
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if total <= 0:
        raise ValueError(f"period must be positive, got {text!r}")
    if total < MIN_PERIOD:
        raise ValueError(f"period {text!r} is below the minimum of 10ms")
    if total > MAX_PERIOD:
        raise ValueError(f"period {text!r} is above the maximum of 24h")
    return total


def _check_period(v: Any) -> Any:
    if v is None:
        return v
    parse_period(v)
    return v


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class MetricSpec(_Strict):
    type: str
    period: str | None = None

    _period = field_validator("period", mode="before")(_check_period)


class RuntimeSpec(_Strict):
    tag_filter: str = ".*"
    period: str | None = None
    metrics: list[MetricSpec] = []
    address: str | None = None  # Neuron 1.x leftover, ignored

    _period = field_validator("period", mode="before")(_check_period)

    @field_validator("tag_filter")
    @classmethod
    def _regex(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"invalid regular expression {v!r}: {e}") from None
        return v


class MonitorConfig(_Strict):
    period: str | None = None
    neuron_runtimes: list[RuntimeSpec] = []
    system_metrics: list[MetricSpec] = []

    _period = field_validator("period", mode="before")(_check_period)


@dataclass(frozen=True)
class RuntimeScope:
    """One ``neuron_runtimes`` entry: which applications, which groups at which periods."""

    index: int
    tag_filter: re.Pattern[str]
    groups: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Plan:
    """The resolved configuration: what to collect and how often."""

    source: str
    system_groups: tuple[tuple[str, float], ...]
    runtime_scopes: tuple[RuntimeScope, ...]
    root_period: float = DEFAULT_PERIOD

    def smallest_period(self) -> float:
        periods = [p for _, p in self.system_groups]
        periods += [p for s in self.runtime_scopes for _, p in s.groups]
        return min(periods) if periods else DEFAULT_PERIOD

    def enables_no_group(self) -> bool:
        """True when the lists name no metric group at all (reports then carry only the top-level sections)."""
        return not self.system_groups and not any(s.groups for s in self.runtime_scopes)

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
        runtime_scopes=(RuntimeScope(0, re.compile(".*"), tuple((g, period) for g in RUNTIME_GROUPS)),),
        root_period=period,
    )


def _json_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(root)"


def _message(err: ErrorDetails) -> str:
    typ = err["type"]
    if typ == "value_error":
        return str(err["ctx"]["error"])
    if typ == "extra_forbidden":
        return "unknown key (not part of the neuron-monitor configuration format)"
    if typ == "missing":
        return "required key is missing"
    if typ == "string_type":
        return f"expected a string, got {_json_type(err.get('input'))}"
    if typ == "list_type":
        return f"expected an array, got {_json_type(err.get('input'))}"
    if typ in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected an object, got {_json_type(err.get('input'))}"
    return str(err["msg"])


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int | float):
        return f"a number ({v})"
    if isinstance(v, str):
        return f"a string ({v!r})"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def _check_types(
    specs: list[MetricSpec], known: tuple[str, ...], other: tuple[str, ...], where: str, other_where: str
) -> None:
    seen: set[str] = set()
    for i, spec in enumerate(specs):
        path = f"{where}[{i}].type"
        if spec.type in other:
            raise ValueError(f'{path}: "{spec.type}" is a {other_where} group and belongs there')
        if spec.type not in known:
            raise ValueError(f'{path}: unknown metric group "{spec.type}" (known: {", ".join(known)})')
        if spec.type in seen:
            raise ValueError(f'{path}: metric group "{spec.type}" is listed twice')
        seen.add(spec.type)


def plan_from_data(data: Any, source: str) -> Plan:
    """Validate parsed JSON and resolve periods (metric > neuron_runtimes entry > root > 5 s)."""
    try:
        cfg = MonitorConfig.model_validate(data)
    except ValidationError as e:
        err = e.errors(include_url=False)[0]
        raise ConfigError(f"{source}: {_json_path(err['loc'])}: {_message(err)}") from None
    try:
        _check_types(cfg.system_metrics, SYSTEM_GROUPS, RUNTIME_GROUPS, "system_metrics", "neuron_runtimes")
        for i, rt in enumerate(cfg.neuron_runtimes):
            _check_types(rt.metrics, RUNTIME_GROUPS, SYSTEM_GROUPS, f"neuron_runtimes[{i}].metrics", "system_metrics")
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
        scopes.append(RuntimeScope(i, re.compile(rt.tag_filter), groups))
    return Plan(source=source, system_groups=system, runtime_scopes=tuple(scopes), root_period=root_period)


def load_plan(path: str | None) -> Plan:
    """Load a config file into a Plan; ``None`` gives the documented defaults."""
    if path is None:
        return default_plan()
    name = str(path)
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{name}: is a directory, not a configuration file") from None
    except PermissionError:
        raise ConfigError(f"{name}: permission denied") from None
    except OSError as e:
        raise ConfigError(f"{name}: cannot read: {e.strerror}") from None
    if not raw.strip():
        raise ConfigError(f"{name}: file is empty (expected a JSON object)")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise ConfigError(f"{name}: invalid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{name}: (root): expected a JSON object, got {_json_type(data)}")
    return plan_from_data(data, name)
