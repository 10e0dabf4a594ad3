"""The pydantic models of monitor.conf (the careful path of `neuron_monitor.daemon.config.plan_from_data`) and the
wording of their validation errors. Imported only when a configuration is not plainly well formed."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from pydantic_core import ErrorDetails

from neuron_monitor.daemon.config_values import ConfigError, json_type, parse_period
from neuron_monitor.daemon.tagmatch import compile_tag_filter


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
        compile_tag_filter(v)  # RE2: linear-time matching; ValueError names what RE2 refuses
        return v


class MonitorConfig(_Strict):
    period: str | None = None
    neuron_runtimes: list[RuntimeSpec] = []
    system_metrics: list[MetricSpec] = []

    _period = field_validator("period", mode="before")(_check_period)


def _json_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(root)"


def _model_at(loc: tuple[int | str, ...]) -> type[BaseModel]:
    """The model whose object holds the key at ``loc`` (list indices skipped)."""
    names = tuple(part for part in loc[:-1] if isinstance(part, str))
    if names == ("neuron_runtimes",):
        return RuntimeSpec
    if names in (("system_metrics",), ("neuron_runtimes", "metrics")):
        return MetricSpec
    return MonitorConfig


def _did_you_mean(loc: tuple[int | str, ...]) -> str:
    """``; did you mean "period"?`` when the unknown key at ``loc`` is close to a key of its object, else ""."""
    key = loc[-1] if loc else None
    if not isinstance(key, str):
        return ""
    close = difflib.get_close_matches(key, list(_model_at(loc).model_fields), n=1, cutoff=0.6)
    return f'; did you mean "{close[0]}"?' if close else ""


def _message(err: ErrorDetails) -> str:
    typ = err["type"]
    if typ == "value_error":
        return str(err["ctx"]["error"])
    if typ == "extra_forbidden":
        return "unknown key (not part of the neuron-monitor configuration format)" + _did_you_mean(err["loc"])
    if typ == "missing":
        return "required key is missing"
    if typ == "string_type":
        return f"expected a string, got {json_type(err.get('input'))}"
    if typ == "list_type":
        return f"expected an array, got {json_type(err.get('input'))}"
    if typ in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected an object, got {json_type(err.get('input'))}"
    return str(err["msg"])


def validate(data: Any, source: str) -> MonitorConfig:
    """``data`` as a `MonitorConfig`; `ConfigError` naming the source, the JSON path and the problem otherwise."""
    try:
        return MonitorConfig.model_validate(data)
    except ValidationError as e:
        errors = e.errors(include_url=False)
        err = errors[0]
        if err["type"] == "missing":  # {"tpye": ...}: the mistyped key says more than the key it lacks
            parent = err["loc"][:-1]
            err = next((x for x in errors if x["type"] == "extra_forbidden" and x["loc"][:-1] == parent), err)
        raise ConfigError(f"{source}: {_json_path(err['loc'])}: {_message(err)}") from None
