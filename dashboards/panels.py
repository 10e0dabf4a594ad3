"""The Grafana building blocks both dashboard builders use (build_dashboard.py for the node dashboard,
build_fleet_dashboard.py for the fleet view): the layout of panels on the grid, queries (targets), panels (stat,
time series), the data source and query variables, the settings every dashboard ends with, and the JSON rendering.
Every panel and query reads the ``$datasource`` variable."""

from __future__ import annotations

import json
from typing import Any

DS = {"type": "prometheus", "uid": "${datasource}"}


class Layout:
    """Places panels left to right in rows of 24 grid units."""

    def __init__(self) -> None:
        self.panels: list[dict[str, Any]] = []
        self.x = 0
        self.y = 0
        self.row_h = 0
        self.next_id = 1

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def row(self, title: str) -> None:
        self.y += self.row_h
        self.x, self.row_h = 0, 0
        self.panels.append(
            {
                "type": "row",
                "title": title,
                "id": self._id(),
                "collapsed": False,
                "panels": [],
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y},
            }
        )
        self.y += 1

    def add(self, panel: dict[str, Any], w: int, h: int) -> None:
        if self.x + w > 24:
            self.y += self.row_h
            self.x, self.row_h = 0, 0
        panel["id"] = self._id()
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.panels.append(panel)
        self.x += w
        self.row_h = max(self.row_h, h)


def target(expr: str, legend: str = "", ref: str = "A", instant: bool = False, table: bool = False) -> dict[str, Any]:
    """One PromQL query of a panel: a range query unless ``instant``, in table format if ``table``."""
    t: dict[str, Any] = {
        "datasource": DS,
        "refId": ref,
        "expr": expr,
        "legendFormat": legend or "__auto",
        "range": not instant,
        "instant": instant,
    }
    if table:
        t["format"] = "table"
    return t


def panel(
    kind: str, title: str, targets: list[dict[str, Any]], unit: str = "short", description: str = "", **extra: Any
) -> dict[str, Any]:
    """A panel of ``kind`` over ``targets``; ``defaults`` and ``options`` in ``extra`` fill its field config and
    options, any other key of ``extra`` is set on the panel as it is."""
    defaults: dict[str, Any] = {"unit": unit}
    defaults.update(extra.pop("defaults", {}))
    p: dict[str, Any] = {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": extra.pop("options", {}),
    }
    p.update(extra)
    return p


def stat(
    title: str, expr: str, unit: str = "short", description: str = "", thresholds: list[Any] | None = None
) -> dict[str, Any]:
    """A stat panel of one instant query, green below the first of ``thresholds`` ((value, colour) pairs)."""
    steps = [{"color": "green", "value": None}] + [{"color": c, "value": v} for v, c in (thresholds or [])]
    return panel(
        "stat",
        title,
        [target(expr, instant=True)],
        unit,
        description,
        defaults={"thresholds": {"mode": "absolute", "steps": steps}},
        options={
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "area",
        },
    )


def series(
    title: str,
    exprs: list[tuple[str, str]],
    unit: str = "short",
    description: str = "",
    stacked: bool = False,
    max_value: float | None = None,
) -> dict[str, Any]:
    """A time series panel of ``exprs`` ((query, legend) pairs), from 0 up (to ``max_value`` when given)."""
    custom: dict[str, Any] = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never"}
    if stacked:
        custom["stacking"] = {"mode": "normal", "group": "A"}
        custom["fillOpacity"] = 40
    defaults: dict[str, Any] = {"custom": custom, "min": 0}
    if max_value is not None:
        defaults["max"] = max_value
    refs = "ABCDEFGH"
    return panel(
        "timeseries",
        title,
        [target(e, legend, refs[i]) for i, (e, legend) in enumerate(exprs)],
        unit,
        description,
        defaults=defaults,
        options={
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
    )


def datasource_variable() -> dict[str, Any]:
    """The ``$datasource`` variable: which Prometheus data source the dashboard reads."""
    return {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "refresh": 1,
        "regex": "",
        "options": [],
    }


def variable(name: str, label: str, query: str) -> dict[str, Any]:
    """A multi-value query variable (with All, matching ``.*``) whose values come from ``query``."""
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "definition": query,
        "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {},
        "hide": 0,
        "refresh": 2,
        "regex": "",
        "sort": 1,
        "options": [],
    }


def settings(title: str, uid: str, time_from: str) -> dict[str, Any]:
    """The keys a dashboard ends with: its default time range (``time_from`` to now), title and uid."""
    return {
        "time": {"from": time_from, "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": title,
        "uid": uid,
        "version": 1,
        "weekStart": "",
    }


def to_json(dashboard: dict[str, Any]) -> str:
    """The dashboard as the committed file holds it."""
    return json.dumps(dashboard, indent=2) + "\n"
