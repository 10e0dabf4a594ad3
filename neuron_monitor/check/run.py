"""`neuron-monitor --check`: collect one report the way the daemon does (the same readers, the same discovery),
then look at every source itself, and print one line per source (`lines.py`).

The node families each configured group reads, and where they were found, come from the report's own
``neuron_monitor.sources`` (written by the readers' discovery), so `--check` never keeps a second list of paths;
each configured group's collection result (its ``error``) follows. The probes (`probes.py`) add what the report
does not say: the device nodes and each ioctl's answer, the data blocks, the EFA join's sources, the kubelet
socket and IMDS.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from dataclasses import dataclass, field
from typing import Any

import orjson

from neuron_monitor.check import probes
from neuron_monitor.check.lines import ABSENT, ERROR, FOUND, MISSING, PARTIAL, UNKNOWN, UNREADABLE, Line
from neuron_monitor.daemon.config import Plan
from neuron_monitor.groups.neuron_device_health import body as H
from neuron_monitor.groups.neuron_device_health.spec import SIGNAL_MISSING, SIGNAL_UNREADABLE
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import nodes
from neuron_monitor.neuron.nodes import Node
from neuron_monitor.neuron.sysfs import DriverTree
from neuron_monitor.schema.read import Report, read_report
from neuron_monitor.util.ranges import device_ranges


def configured_groups(plan: Plan) -> list[str]:
    names = [name for name, _ in plan.system_groups]
    for scope in plan.runtime_scopes:
        names += [name for name, _ in scope.groups if name not in names]
    return names


def collect_one(args: argparse.Namespace, plan: Plan, root: RootFS) -> dict[str, Any]:
    """One report, collected as ``neuron-monitor --once`` does, kept instead of written."""
    from neuron_monitor.daemon.cli import Daemon

    once = argparse.Namespace(**{**vars(args), "once": True, "record": None})
    daemon = Daemon(once, plan, root)
    lines: list[bytes] = []

    async def keep(data: bytes) -> None:
        lines.append(data)

    daemon.scheduler.write = keep
    daemon.scheduler.write_now = None
    try:
        asyncio.run(daemon.run())
    finally:
        daemon.disarm()
    text = b"".join(lines).strip().splitlines()
    report: dict[str, Any] = orjson.loads(text[-1]) if text else {}
    return report


def _node_by_family() -> dict[str, Node]:
    return {v.family: v for v in vars(nodes).values() if isinstance(v, Node)}


@dataclass(slots=True)
class _Where:
    """Where the readers' discovery finds a node family: its path on the first device that has it, the devices
    without it and why (two candidates, ...) when the discovery says, and the devices where the file found cannot
    be read, with the first reason."""

    path: str = ""
    lacking: list[int] = field(default_factory=list)
    why: str = ""
    unreadable: list[int] = field(default_factory=list)
    read_error: str = ""


def _where(root: RootFS, tree: DriverTree, devices: tuple[int, ...], node: Node | None) -> _Where:
    """Where ``node`` is on each device (see `_Where`); each file found is read once, as its reader would."""
    out = _Where()
    if node is None:
        return out
    for index in devices:
        found = tree.find(index, node, 0 if node.core else -1)
        if found.rel is None:
            out.lacking.append(index)
            out.why = out.why or found.problem
            continue
        out.path = out.path or found.rel
        if not node.directory:
            try:
                root.read_bytes(found.rel)
            except OSError as e:
                out.unreadable.append(index)
                out.read_error = out.read_error or (e.strerror or str(e))
    return out


def _families(report: Report, configured: list[str], root: RootFS, devices: tuple[int, ...]) -> list[Line]:
    """One line per node family a group reads, from the daemon's own discovery (``neuron_monitor.sources``), with
    where the same discovery code finds it (neuron/discovery.py through DriverTree). A family not found is needed
    (a reason to exit 1) when it is required here (check/required.py: the health rules expect it of this
    architecture and driver); else it is shown, as one this driver does not expose."""
    sources = report.sources
    if sources is None or not sources.groups:
        return [Line("node families", UNKNOWN, "this daemon's report does not name the node families it found")]
    tree = DriverTree(root)
    by_family = _node_by_family()
    lines: list[Line] = []
    for group, info in sources.groups.items():
        need = group if group in configured else ""
        if not info.found:
            lines.append(Line(f"{group}: node families", UNKNOWN, f"layout {info.layout}, no family listed"))
        for family, ok in info.found.items():
            where = _where(root, tree, devices, by_family.get(family))
            path, lacking = where.path, where.lacking
            on = f" on device {device_ranges(lacking)}" if lacking else ""
            why = f": {where.why}" if where.why else ""
            if ok and where.unreadable:  # found, but its reader cannot read it: a fault wherever it is required
                detail = f"cannot be read on device {device_ranges(where.unreadable)}: {where.read_error} ({path})"
                lines.append(Line(f"{group}: {family}", UNREADABLE, detail, need if family in info.required else ""))
            elif ok:
                lines.append(Line(f"{group}: {family}", FOUND, f"layout {info.layout}, e.g. {path or '?'}", need))
            elif family in info.required:
                lines.append(Line(f"{group}: {family}", MISSING, f"not found{on}{why} (layout {info.layout})", need))
            else:
                detail = f"not found{on}{why}; not expected from this driver and architecture (docs/health.md)"
                lines.append(Line(f"{group}: {family}", MISSING, detail))
    return lines


def _groups(report: Report, configured: list[str]) -> list[Line]:
    """Each configured group's collection: collected, absent on this host, or its error."""
    seen: dict[str, Line] = {}
    groups = [*report.system.values()]
    for entry in report.runtimes:
        groups += entry.groups.values()
    for g in groups:
        if g.name in seen and seen[g.name].status != FOUND:
            continue
        if g.absent:
            seen[g.name] = Line(f"group {g.name}", ABSENT, g.error)
        elif g.error and g.usable:  # a group that reports what it has (partial_errors): what it lacks is named
            seen[g.name] = Line(f"group {g.name}", PARTIAL, g.error)
        elif g.error:
            seen[g.name] = Line(f"group {g.name}", ERROR, g.error, g.name)
        else:
            seen[g.name] = Line(f"group {g.name}", FOUND, "collected", g.name)
    out = [seen[name] for name in configured if name in seen]
    runtime = [name for name in configured if name not in seen and name in probes.NEEDS["dev"]]
    if runtime and not report.runtimes:
        out.append(Line("runtime groups", FOUND, f"no Neuron application attached: {', '.join(runtime)} not shown"))
    return out


HEALTH_GROUP = "neuron_device_health"
# the health rules that make a device unknown because the daemon did not read one of its signals (docs/health.md)
BLIND_STATUS = {SIGNAL_UNREADABLE: UNREADABLE, SIGNAL_MISSING: MISSING}


def _health(report: dict[str, Any], configured: list[str]) -> list[Line]:
    """One line per set of devices whose health verdict is ``unknown`` for the same reasons, from the report's
    own verdicts: the check never says every source is there while a verdict is blind. A device unknown because
    a signal was not read (a file there but unreadable, a node not found, even when a failed read made the group
    look for its nodes again and its ``sources`` no longer list them) is a failing line needed by
    neuron_device_health; one unknown for what the device itself says (power NO_DATA after boot, firmware not
    answering) is shown, never failing."""
    if HEALTH_GROUP not in configured:
        return []
    body = report.get("system_data", {}).get(HEALTH_GROUP)
    devices = body.get(H.NEURON_DEVICES) if isinstance(body, dict) else None
    by_reasons: dict[tuple[str, tuple[str, ...]], list[int]] = {}
    for entry in devices if isinstance(devices, list) else ():
        health = entry.get(H.HEALTH) if isinstance(entry, dict) else None
        if not isinstance(health, dict) or health.get(H.STATE) != H.UNKNOWN:
            continue
        reasons = [r for r in health.get(H.REASONS) or () if isinstance(r, dict)]
        status = next((BLIND_STATUS[str(r.get(H.RULE))] for r in reasons if r.get(H.RULE) in BLIND_STATUS), UNKNOWN)
        texts = tuple(f"{r.get(H.RULE)} {r.get(H.DETAIL)}".strip() for r in reasons if r.get(H.SEVERITY) == H.UNKNOWN)
        index = entry.get(H.DEVICE_INDEX)
        if isinstance(index, int):
            by_reasons.setdefault((status, texts), []).append(index)
    lines = []
    for (status, texts), indexes in by_reasons.items():
        detail = f"verdict unknown: {', '.join(texts) or 'no reason given'}"
        group = HEALTH_GROUP if status != UNKNOWN else ""
        lines.append(Line(f"health of device {device_ranges(sorted(indexes))}", status, detail, group))
    return lines


def check_lines(args: argparse.Namespace, plan: Plan, root: RootFS, report: dict[str, Any]) -> list[Line]:
    configured = configured_groups(plan)
    rep = read_report(report)
    lines, devices = probes.driver_lines(root, configured)
    lines += _families(rep, configured, root, devices)
    lines += _groups(rep, configured)
    lines += _health(report, configured)
    lines += probes.device_node_lines(root, devices, configured)
    lines += probes.efa_lines(root, devices, configured)
    lines += probes.procfs_lines(root, configured)
    lines.append(probes.kubelet_line(args.pod_resources_socket, bool(args.k8s_info)))
    imds = not args.simulate and not args.no_imds
    imds = imds and os.environ.get("AWS_EC2_METADATA_DISABLED", "").lower() != "true"
    lines.append(probes.imds_line(args.imds_endpoint, args.imds_timeout, imds))
    return lines
