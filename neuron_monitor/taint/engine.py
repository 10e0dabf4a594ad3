"""The taint loop's work, one step at a time: verdicts from a report, the DRA names of the devices, the changes
the planner asks for, made through the API within the rate limit, each counted and logged once.

`verdicts` reads a report's ``neuron_device_health`` body; `device_names` inverts the node's ResourceSlices
(device index -> (pool, device)); `Engine` holds this node's rules (adopted at start, listed again every
``resync`` seconds) and makes the planned changes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from neuron_monitor.groups.neuron_device_health import body as K
from neuron_monitor.groups.neuron_device_health.spec import NAME as HEALTH_GROUP
from neuron_monitor.k8s.dra import NODE_RESOURCE_TYPE, DraDirectory, SliceDevice, index_from_name
from neuron_monitor.k8s.kubeapi import KubeApiError, one_line
from neuron_monitor.taint.decide import UNHEALTHY, Change, Planner, RateLimit
from neuron_monitor.taint.rules import TAINT_KEY, DeviceKey, OwnRule, build_rule, label_value_ok, own_rule
from neuron_monitor.taint.writer import TaintApi, explain, status_reason

log = logging.getLogger("neuron_monitor.taint")
MAX_DEVICES = 4096


def verdicts(report: dict[str, Any]) -> dict[int, tuple[str, str]]:
    """Device index -> (state, the first unhealthy rule) from a report; empty without the health group."""
    system = report.get("system_data")
    body = system.get(HEALTH_GROUP) if isinstance(system, dict) else None
    entries = body.get(K.NEURON_DEVICES) if isinstance(body, dict) else None
    out: dict[int, tuple[str, str]] = {}
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or len(out) >= MAX_DEVICES:
            continue
        index = entry.get(K.DEVICE_INDEX)
        health = entry.get(K.HEALTH)
        if isinstance(index, str) and index.isdigit():
            index = int(index)
        if not isinstance(index, int) or isinstance(index, bool) or not isinstance(health, dict):
            continue
        state = health.get(K.STATE)
        rule = ""
        if state == UNHEALTHY:
            for reason in health.get(K.REASONS) or []:
                if isinstance(reason, dict) and reason.get(K.SEVERITY) == UNHEALTHY:
                    name = reason.get(K.RULE)
                    rule = name if isinstance(name, str) and label_value_ok(name) else ""
                    break
        out[index] = (state if isinstance(state, str) else "unknown", rule)
    return out


def device_names(devices: dict[DeviceKey, SliceDevice]) -> dict[int, DeviceKey]:
    """Neuron device index -> (pool, DRA device name), from the node's slices: the ``deviceId`` attribute, else the
    index in the name (``neurondeviceN``). A whole-node device (``neuron_node``) and an index claimed by two
    devices are left out: neither is a device to taint."""
    out: dict[int, DeviceKey] = {}
    twice: set[int] = set()
    for key, dev in sorted(devices.items()):
        if dev.resource_type == NODE_RESOURCE_TYPE:
            continue
        index = dev.device_id if dev.device_id is not None else index_from_name(key[1])
        if index is None:
            continue
        if index in out:
            twice.add(index)
        out[index] = key
    for index in twice:
        del out[index]
    return out


@dataclass
class Counters:
    """What was done and refused, for the exit summary and the metrics file (``neuron_monitor_taint_*``)."""

    changes: dict[str, int] = field(default_factory=dict)  # create, delete, update, adopt
    refused: dict[str, int] = field(default_factory=dict)  # rate_limit, node_cap, unmapped, conflict, changed
    api_errors: dict[str, int] = field(default_factory=dict)  # HTTP status or no_answer
    reports: int = 0
    version: int = 0  # bumped at every count, so the metrics file is written only when something changed

    def add(self, kind: str, key: str, n: int = 1) -> None:
        table: dict[str, int] = getattr(self, kind)
        table[key] = table.get(key, 0) + n
        self.version += 1


class Engine:
    def __init__(
        self,
        api: TaintApi,
        directory: DraDirectory,
        planner: Planner,
        limit: RateLimit,
        resync: float,
        confirm: Callable[[int], bool] | None = None,
    ) -> None:
        self.api = api
        self.directory = directory
        self.planner = planner
        self.limit = limit
        self.resync = resync
        self.confirm = confirm
        self.rules: dict[DeviceKey, OwnRule] = {}
        self.counters = Counters()
        self.unmapped: set[int] = set()  # devices due for a taint that have no DRA name (named in the output)
        self._listed: float | None = None
        self._told: set[tuple[str, int]] = set()  # (refusal reason, device) logged in this episode
        self.last_error = ""
        self._limited = False
        self._slice_errors = ""

    # -- the node's rules -------------------------------------------------------------------------------------
    def list_rules(self, now: float) -> bool:
        """List this node's rules (adopting those not known yet); False when the API could not be read."""
        try:
            found, foreign = self.api.list_own()
        except KubeApiError as e:
            self._api_error("list devicetaintrules", e)
            self._listed = now  # tried: again after ``resync``, not at every step
            return False
        for key, rule in sorted(found.items()):
            if key not in self.rules:
                self.counters.add("changes", "adopt")
                log.info(
                    "adopted rule %s (pool %s, device %s, %s=%s:%s)",
                    rule.name,
                    rule.pool,
                    rule.device,
                    TAINT_KEY,
                    rule.value,
                    rule.effect,
                )
        for key, rule in sorted(found.items()):
            old = self.rules.get(key)
            if rule.eviction and (old is None or old.eviction != rule.eviction):
                log.warning("rule %s (%s): EvictionInProgress %s", rule.name, rule.effect, one_line(rule.eviction, 300))
        if foreign:
            log.warning("%d listed DeviceTaintRules are not this node's (labels or selector): left alone", foreign)
        self.rules = found
        self._listed = now
        return True

    # -- one step ---------------------------------------------------------------------------------------------
    def step(self, now: float) -> None:
        """Make the changes due at ``now`` (after the verdicts of the latest report were observed)."""
        if self._listed is None or now - self._listed >= self.resync:
            self.list_rules(now)
        due = [i for i in self.planner.tracks if self.planner.due(i, now)]
        if not due and not self.rules:
            self.unmapped.clear()
            self._told.clear()
            return
        self.directory.begin()
        stale = any(i not in self.unmapped for i in due)
        mapping = device_names(self.directory.slice_devices(stale=stale))
        slice_errors = "; ".join(self.directory.errors)
        if slice_errors and slice_errors != self._slice_errors:
            log.warning("%s", one_line(slice_errors, 600))
        self._slice_errors = slice_errors
        confirmed: dict[int, bool] = {}

        def confirm(index: int) -> bool:
            if self.confirm is None:
                return False
            if index not in confirmed:
                confirmed[index] = self.confirm(index)
            return confirmed[index]

        plan = self.planner.plan(now, mapping, self.rules, confirm if self.confirm is not None else None)
        self.unmapped = {r.index for r in plan.refused if r.reason == "unmapped"}
        for refusal in plan.refused:
            self.counters.add("refused", refusal.reason)
            told = (refusal.reason, refusal.index)
            if told not in self._told:
                self._told.add(told)
                if refusal.reason == "unmapped":
                    log.warning(
                        "not tainted: neuron device %d (%s) has no DRA device in this node's ResourceSlices%s",
                        refusal.index,
                        refusal.value,
                        " (they could not be read)" if self._slice_errors else "",
                    )
                else:
                    log.warning(
                        "not tainted: neuron device %d (%s): the node cap of %d devices is reached and no "
                        "independent read confirmed it",
                        refusal.index,
                        refusal.value,
                        self.planner.node_cap,
                    )
        self._told = {t for t in self._told if self.planner.due(t[1], now)}
        for change in plan.changes:
            if not self.limit.allow(now):
                self.counters.add("refused", "rate_limit")
                if not self._limited:  # once per stretch of held-back changes
                    self._limited = True
                    log.warning(
                        "rate limit: %d changes a minute reached; %s of %s waits",
                        self.limit.per_minute,
                        *change_name(change),
                    )
                continue
            self._limited = False
            self._make(change)

    def _make(self, change: Change) -> None:
        pool, device = change.key
        node, driver, effect = self.api.node, self.api.driver, self.planner.effect
        try:
            if change.action == "create":
                obj = build_rule(node, driver, pool, device, change.value, effect, self.api.version)
                try:
                    answer = self.api.create(obj)
                except KubeApiError as e:
                    if e.status != 409:
                        raise
                    answer = self.api.get(obj["metadata"]["name"])  # there already: ours (a lost answer)?
                    mine = own_rule(answer, node, driver)
                    if mine is None or (mine.pool, mine.device) != change.key:
                        self.counters.add("refused", "conflict")
                        log.error("not tainted: %s exists and is not this node's rule for it", obj["metadata"]["name"])
                        return
                rule = own_rule(answer, node, driver) or _assumed(obj)
                self.rules[change.key] = rule
                self.counters.add("changes", "create")
                log.warning(
                    "tainted neuron device %s (pool %s, device %s): rule %s, %s=%s:%s",
                    change.index,
                    pool,
                    device,
                    rule.name,
                    TAINT_KEY,
                    rule.value,
                    rule.effect,
                )
            elif change.action == "delete" and change.rule is not None:
                try:
                    self.api.delete(change.rule)
                except KubeApiError as e:
                    if e.status == 409:  # changed since listed: not deleted; listed again at the next resync
                        self.counters.add("refused", "changed")
                        log.warning("rule %s changed since it was listed: not deleted", change.rule.name)
                        self._listed = None
                        return
                    if e.status != 404:
                        raise
                self.rules.pop(change.key, None)
                self.counters.add("changes", "delete")
                log.warning(
                    "untainted neuron device %s (pool %s, device %s): rule %s deleted (healthy for %g s)",
                    change.index,
                    pool,
                    device,
                    change.rule.name,
                    self.planner.hold,
                )
            elif change.action == "update" and change.rule is not None:
                obj = build_rule(node, driver, pool, device, change.rule.value, effect, self.api.version)
                obj["metadata"]["name"] = change.rule.name
                obj["metadata"]["resourceVersion"] = change.rule.resource_version
                answer = self.api.replace(obj)
                self.rules[change.key] = own_rule(answer, node, driver) or _assumed(obj)
                self.counters.add("changes", "update")
                log.warning("rule %s: effect %s -> %s", change.rule.name, change.rule.effect, effect)
        except KubeApiError as e:
            self._api_error(f"{change.action} rule for pool {pool} device {device}", e)

    def _api_error(self, what: str, e: KubeApiError) -> None:
        self.counters.add("api_errors", status_reason(e))
        text = f"{what}: {explain(e)}"
        if text != self.last_error:
            log.error("%s", one_line(text, 600))
        self.last_error = one_line(text, 600)


def change_name(change: Change) -> tuple[str, str]:
    return change.action, f"{change.key[0]}/{change.key[1]}"


def _assumed(obj: dict[str, Any]) -> OwnRule:
    """The rule as sent, when the server's answer did not echo it (an empty 2xx body)."""
    spec = obj["spec"]
    return OwnRule(
        obj["metadata"]["name"],
        spec["deviceSelector"]["pool"],
        spec["deviceSelector"]["device"],
        spec["taint"]["value"],
        spec["taint"]["effect"],
        obj["metadata"].get("resourceVersion", ""),
    )
