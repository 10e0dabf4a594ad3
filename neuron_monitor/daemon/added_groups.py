"""An AWS-only configuration keeps the health features: the three system groups AWS's tool does not have are added.

AWS's ``monitor.conf`` names only AWS's seven groups. Run unchanged, it would give a daemon without the node's
health verdict (``neuron_device_health``), EFA counters (``efa_counters``) and device telemetry
(``neuron_device_telemetry``), so the shipped alerts on them would have no data and nothing would say so. The rule
(docs/migrating-from-aws.md, "Health groups in an AWS configuration"):

- a configuration *collects Neuron data* when it names ``neuron_hw_counters`` or any runtime group; one that names
  none of the three groups below and collects Neuron data gets them added, at the period of its
  ``neuron_hw_counters`` entry when it has one, else at its root period;
- a host-only configuration (only ``vcpu_usage``/``memory_info``) and one that names any of the three are kept as
  written: naming one of ours shows the file was written for this daemon;
- ``--exact-groups`` keeps every file as written; the daemon then says at start which features are missing.

Either way one line on stderr says what happened, whatever ``--verbose`` says (like configuration warnings).
"""

from __future__ import annotations

import dataclasses

from neuron_monitor.daemon.config import Plan

HEALTH_GROUPS: tuple[str, ...] = ("neuron_device_health", "efa_counters", "neuron_device_telemetry")
"""The system groups AWS's neuron-monitor does not have, in the order they are added."""

WHAT_THEY_GIVE = "the health verdict, EFA counters and device telemetry"


def _names(plan: Plan) -> set[str]:
    names = {g for g, _ in plan.system_groups}
    for scope in plan.runtime_scopes:
        names.update(g for g, _ in scope.groups)
    return names


def lacks_health_groups(plan: Plan) -> bool:
    """True for an AWS-only configuration that collects Neuron data: none of HEALTH_GROUPS, but
    ``neuron_hw_counters`` or a runtime group."""
    names = _names(plan)
    if names & set(HEALTH_GROUPS):
        return False
    return "neuron_hw_counters" in names or any(scope.groups for scope in plan.runtime_scopes)


def _period_for_added(plan: Plan) -> float:
    periods = dict(plan.system_groups)
    return periods.get("neuron_hw_counters", plan.root_period)


def with_health_groups(plan: Plan, *, exact: bool = False) -> tuple[Plan, str | None]:
    """The plan to run and the line to say about it (None when there is nothing to say).

    Adds HEALTH_GROUPS to an AWS-only configuration unless ``exact``; with ``exact`` the plan is unchanged and the
    line says what is missing."""
    if not lacks_health_groups(plan):
        return plan, None
    added = ", ".join(HEALTH_GROUPS)
    if exact:
        return plan, (
            f"warning: {plan.source}: names only AWS's metric groups and --exact-groups keeps it so: no {added}"
            f" ({WHAT_THEY_GIVE}); the alerts on them have no data"
        )
    period = _period_for_added(plan)
    new = dataclasses.replace(plan, system_groups=plan.system_groups + tuple((g, period) for g in HEALTH_GROUPS))
    return new, (
        f"note: {plan.source}: names only AWS's metric groups; also collecting {added} every {period:g} s"
        f" ({WHAT_THEY_GIVE}; --exact-groups collects only the file's groups)"
    )
