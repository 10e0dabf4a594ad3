"""Test helpers: build a snapshot from reports and read its exposition back as {(name, labels): value}."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from neuron_monitor.exporters.prometheus.collector import ExporterCollector
from neuron_monitor.exporters.prometheus.snapshot import ShapeOptions
from neuron_monitor.exporters.prometheus.state import ExporterState

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Series:
    """Exposition text -> {(sample name, labels): value}; fails on a duplicate series."""
    out: Series = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in out, f"duplicate series {key}"
            out[key] = s.value
    return out


def scrape(state: ExporterState, openmetrics: bool = False) -> str:
    return ExporterCollector(state).scrape([], openmetrics).decode()


def feed(reports: Iterable[dict[str, Any]], options: ShapeOptions | None = None, **kw: Any) -> ExporterState:
    state = ExporterState(options, **kw)
    for r in reports:
        assert state.apply(r)
    return state


def select(series: Series, name: str, **labels: str) -> dict[frozenset[tuple[str, str]], float]:
    """The samples of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return {lab: v for (n, lab), v in series.items() if n == name and want <= lab}


def one(series: Series, name: str, **labels: str) -> float:
    found = select(series, name, **labels)
    assert len(found) == 1, f"{name} {labels}: {len(found)} samples"
    return next(iter(found.values()))


def label_names(series: Series, name: str) -> set[frozenset[str]]:
    return {frozenset(k for k, _ in lab) for (n, lab), _ in series.items() if n == name}


def start_daemon(
    root: Path, conf: Path, runtime_groups: Sequence[str], system_groups: Sequence[str]
) -> subprocess.Popen[bytes]:
    """The real daemon on the simulated host at ``root``, its configuration written to ``conf``: ``runtime_groups``
    for every runtime and ``system_groups`` for the host, every second; its reports on a pipe (``.stdout``)."""
    config = {
        "period": "1s",
        "neuron_runtimes": [{"tag_filter": ".*", "metrics": [{"type": t} for t in runtime_groups]}],
        "system_metrics": [{"type": t} for t in system_groups],
    }
    conf.write_text(json.dumps(config))
    command = [sys.executable, "-m", "neuron_monitor.daemon.cli", "--root", str(root), "-c", str(conf), "--no-imds"]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
