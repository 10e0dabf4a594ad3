"""Which of the driver's node families this host must expose: the report's ``neuron_monitor.sources`` entries gain
``required`` (sorted families), which `--check` and the Prometheus exporter's ``neuron_monitor_source_found`` read.

A family is required when a configured group reads it and the health rules expect it of some device here (per
architecture and driver version: ``expected_signals`` in groups/neuron_device_health/rules.py, the table and its
sources in docs/health.md). So a family an older driver or Inferentia 1 never exposes is reported as not found,
and is no reason to fail a check or fire an alert; a required family not found is (the driver moved it, or it is
gone). The device names are read once per device listing; the driver version is the report's own.
"""

from __future__ import annotations

from typing import Any

from neuron_monitor.groups.neuron_device_health.rules import expected_signals
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.sysfs import DriverTree, parse_driver_version

REQUIRED_KEY = "required"


class RequiredFamilies:
    """Runs once per report (the daemon's ``neuron_monitor`` object), so what it derives is kept while its inputs
    stay the same objects: the device names per device listing, the families per driver version and names, the
    annotated sources while every group hands out the same sources objects."""

    def __init__(self, root: RootFS) -> None:
        self.tree = DriverTree(root)
        self._names: tuple[tuple[int, ...], frozenset[str]] = ((), frozenset())  # listing -> device names
        self._families: tuple[str, frozenset[str], frozenset[str]] | None = None  # version, names -> families
        self._annotated: tuple[frozenset[str], list[tuple[str, Any]], dict[str, Any]] | None = None

    def device_names(self) -> frozenset[str]:
        devices = self.tree.device_indexes()
        if devices != self._names[0]:
            self._names = (devices, frozenset(self.tree.device_name(i) for i in devices))
        return self._names[1]

    def families(self, driver_version: str) -> frozenset[str]:
        """The families some device of this host must expose under ``driver_version`` ("" unreadable)."""
        names = self.device_names()
        kept = self._families
        if kept is not None and kept[0] == driver_version and kept[1] is names:
            return kept[2]
        driver = parse_driver_version(driver_version) if driver_version else None
        families = frozenset(f for name in names for f in expected_signals(name, driver))
        self._families = (driver_version, names, families)
        return families

    def annotate(self, monitor: dict[str, Any]) -> dict[str, Any]:
        """``monitor`` with ``required`` added to each entry of its ``sources`` (new entry objects: a group may hand
        out the same sources object report after report, which is never changed; while every entry is the same
        object as last time and the families are the same, last time's annotated ``sources`` is used again)."""
        sources = monitor.get("sources")
        if not isinstance(sources, dict) or not sources:
            return monitor
        version = monitor.get("driver_version")
        required = self.families(version if isinstance(version, str) else "")
        kept = self._annotated
        if kept is not None and kept[0] == required and _same_entries(kept[1], sources):
            return {**monitor, "sources": kept[2]}
        out = {}
        for name, entry in sources.items():
            if isinstance(entry, dict) and isinstance(entry.get("found"), dict):
                entry = {**entry, REQUIRED_KEY: sorted(f for f in entry["found"] if f in required)}
            out[name] = entry
        self._annotated = (required, list(sources.items()), out)
        return {**monitor, "sources": out}


def _same_entries(kept: list[tuple[str, Any]], sources: dict[str, Any]) -> bool:
    """The same names in the same order, each with the very same entry object (the list holds them, so no
    object of theirs is freed and its identity reused)."""
    if len(kept) != len(sources):
        return False
    return all(name == k[0] and entry is k[1] for k, (name, entry) in zip(kept, sources.items(), strict=True))
