"""Which pod owns which NeuronCore and Neuron device: pod-resources allocations -> ``neuron_k8s_info`` maps.

Reads: the pods returned by the kubelet's List (see podresources.py), optionally the node's allocatable devices,
and the DRA devices already resolved to device indices (``DraDevice``, see pod_info.py). Returns:
``{"<core index>": {"pod_name", "namespace", "container_name": [...]}}`` for cores and the same for devices, as
AWS's ``neuron_k8s_info`` object has them; entries that come from a DRA claim add ``pod_uid`` (when the API server
told it), ``claim_name`` and ``claim_namespace``.

Device-plugin IDs: ``aws.amazon.com/neuroncore`` IDs are NeuronCore indices; ``aws.amazon.com/neuron`` IDs
(and the older alias ``aws.amazon.com/neurondevice``) are device indices. A device allocation covers the cores
``device * cores_per_device + i``. A core allocation marks its device ``core // cores_per_device`` when no other
pod holds cores of that device (a device whose cores several pods share has no single owner and is left out of
the device map). Without a known ``cores_per_device`` only the allocated kind is mapped. IDs that are not plain
decimal integers are skipped and counted, never guessed at (the Neuron device plugin issues indices); so are
indices above the bound ``max_index``. When two pods claim the same index (allocations are exclusive, so this
means stale kubelet state) the first pod in (namespace, name) order keeps it and the conflict is counted.

DRA (whole devices): a claimed device covers the cores ``device * cpd + i`` at the cores per device of the
claim's LNC (``DraDevice.cores_per_device``, else the node's). Pods sharing one claim share its devices (their
names are joined with ","). Nothing DRA-related is guessed: a device (or core) held by two different claims, or
through a claim and through the device plugin at once (a node in migration), is left out of both maps and named
in ``Attribution.dra_conflicts``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from neuron_monitor.k8s.podresources import ContainerDevices, PodResources

NEURONCORE_RESOURCES: frozenset[str] = frozenset({"aws.amazon.com/neuroncore"})
NEURON_DEVICE_RESOURCES: frozenset[str] = frozenset({"aws.amazon.com/neuron", "aws.amazon.com/neurondevice"})
MAX_INDEX = 4095
MAX_CONTAINERS_PER_ENTRY = 32


@dataclass
class Attribution:
    """The two maps of ``neuron_k8s_info`` plus what was left out and why."""

    cores: dict[str, dict[str, object]] = field(default_factory=dict)
    devices: dict[str, dict[str, object]] = field(default_factory=dict)
    skipped_ids: list[str] = field(default_factory=list)
    shared_devices: list[int] = field(default_factory=list)
    conflicts: int = 0
    dra_conflicts: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class DraDevice:
    """One Neuron device a container holds through a DRA claim, already resolved to its index."""

    index: int
    claim: tuple[str, str]  # (namespace, name)
    pod: str
    container: str
    pod_uid: str = ""
    cores_per_device: int | None = None  # at the claim's LNC; None: the node's


@dataclass
class _ClaimOwner:
    claim: tuple[str, str]
    pods: dict[str, str] = field(default_factory=dict)  # pod name -> uid ("" unknown)
    containers: set[str] = field(default_factory=set)

    def entry(self) -> dict[str, object]:
        names = sorted(self.pods)
        uids = [self.pods[n] for n in names]
        out: dict[str, object] = {
            "pod_name": ",".join(names),
            "namespace": self.claim[0],
            "container_name": sorted(self.containers)[:MAX_CONTAINERS_PER_ENTRY],
        }
        if all(uids):
            out["pod_uid"] = ",".join(uids)
        out["claim_name"] = self.claim[1]
        out["claim_namespace"] = self.claim[0]
        return out


def parse_index(device_id: str, max_index: int = MAX_INDEX) -> int | None:
    """A device-plugin ID as an index, or None if it is not a plain decimal integer within the bound."""
    if not device_id.isascii() or not device_id.isdigit():
        return None
    idx = int(device_id)
    return idx if idx <= max_index else None


def cores_per_device_from(allocatable: Iterable[ContainerDevices] | None) -> int | None:
    """Infer cores per device from the node's allocatable cores and devices (None if not both known)."""
    if allocatable is None:
        return None
    cores: set[str] = set()
    devices: set[str] = set()
    for dev in allocatable:
        if dev.resource_name in NEURONCORE_RESOURCES:
            cores.update(dev.device_ids)
        elif dev.resource_name in NEURON_DEVICE_RESOURCES:
            devices.update(dev.device_ids)
    if not cores or not devices or len(cores) % len(devices):
        return None
    return len(cores) // len(devices)


def _claim(
    table: dict[int, tuple[tuple[str, str], list[str]]], idx: int, owner: tuple[str, str], container: str
) -> bool:
    """Record ``container`` of pod ``owner`` on index ``idx``; False if another pod already holds it."""
    entry = table.get(idx)
    if entry is None:
        table[idx] = (owner, [container])
        return True
    if entry[0] != owner:
        return False
    names = entry[1]
    if container not in names and len(names) < MAX_CONTAINERS_PER_ENTRY:
        names.append(container)
    return True


def _as_map(table: dict[int, tuple[tuple[str, str], list[str]]]) -> dict[str, dict[str, object]]:
    return {
        str(idx): {"pod_name": owner[1], "namespace": owner[0], "container_name": sorted(names)}
        for idx, (owner, names) in sorted(table.items())
    }


def attribute(
    pods: Iterable[PodResources],
    cores_per_device: int | None,
    max_index: int = MAX_INDEX,
    dra: Iterable[DraDevice] = (),
) -> Attribution:
    """Build the core and device maps from the kubelet's device-plugin allocations and the resolved DRA devices."""
    cpd = cores_per_device if cores_per_device and cores_per_device > 0 else None
    cores: dict[int, tuple[tuple[str, str], list[str]]] = {}
    devices: dict[int, tuple[tuple[str, str], list[str]]] = {}
    # devices touched by core-level allocations: device -> owner -> containers
    via_cores: dict[int, dict[tuple[str, str], list[str]]] = {}
    out = Attribution()
    for pod in sorted(pods, key=lambda p: (p.namespace, p.name)):
        owner = (pod.namespace, pod.name)
        for container in pod.containers:
            for alloc in container.devices:
                is_core = alloc.resource_name in NEURONCORE_RESOURCES
                if not is_core and alloc.resource_name not in NEURON_DEVICE_RESOURCES:
                    continue
                for device_id in alloc.device_ids:
                    idx = parse_index(device_id, max_index)
                    if idx is None:
                        out.skipped_ids.append(f"{alloc.resource_name}={device_id}")
                        continue
                    if is_core:
                        ok = _claim(cores, idx, owner, container.name)
                        if cpd:
                            via_cores.setdefault(idx // cpd, {}).setdefault(owner, []).append(container.name)
                    else:
                        ok = _claim(devices, idx, owner, container.name)
                        if cpd:
                            for core in range(idx * cpd, min((idx + 1) * cpd, max_index + 1)):
                                ok = _claim(cores, core, owner, container.name) and ok
                    if not ok:
                        out.conflicts += 1
    for dev, owners in via_cores.items():
        if len(owners) != 1:
            out.shared_devices.append(dev)  # cores of one device held by several pods: no single owner
            continue
        ((owner, names),) = owners.items()
        for name in names:
            if not _claim(devices, dev, owner, name):
                out.conflicts += 1
                break
    out.cores = _as_map(cores)
    out.devices = _as_map(devices)
    _add_dra(out, list(dra), cpd, max_index)
    return out


def _add_dra(out: Attribution, dra: list[DraDevice], node_cpd: int | None, max_index: int) -> None:
    """Merge the DRA devices into ``out``: owners by claim; an index with two owners is dropped and named."""
    if not dra:
        return
    dev_owner: dict[int, _ClaimOwner] = {}
    dev_cores: dict[int, range] = {}
    bad_devices: dict[int, str] = {}
    for d in sorted(dra, key=lambda d: (d.claim, d.pod, d.container, d.index)):
        owner = dev_owner.get(d.index)
        if owner is None:
            owner = dev_owner[d.index] = _ClaimOwner(d.claim)
            cpd = d.cores_per_device or node_cpd
            dev_cores[d.index] = range(d.index * cpd, min((d.index + 1) * cpd, max_index + 1)) if cpd else range(0)
        elif owner.claim != d.claim:
            bad_devices.setdefault(
                d.index, f"device {d.index} is held by claims {_name(owner.claim)} and {_name(d.claim)}"
            )
            continue
        if d.pod not in owner.pods or (d.pod_uid and not owner.pods[d.pod]):
            owner.pods[d.pod] = d.pod_uid
        owner.containers.add(d.container)
    # cores: two devices' claims on one core (claims at different LNCs number cores differently)
    core_owner: dict[int, int] = {}
    for idx, cores in sorted(dev_cores.items()):
        if idx in bad_devices:
            continue
        for core in cores:
            other = core_owner.setdefault(core, idx)
            if other != idx and dev_owner[other].claim != dev_owner[idx].claim:
                bad_devices.setdefault(
                    idx,
                    f"core {core} is covered by device {other} (claim {_name(dev_owner[other].claim)}) and device "
                    f"{idx} (claim {_name(dev_owner[idx].claim)}) at different cores per device",
                )
                bad_devices.setdefault(other, bad_devices[idx])
    # a node in migration: the same device held through the device plugin and through a claim
    plugin_dev_of_core: dict[int, str] = {}
    if node_cpd:
        for core_key, entry in out.cores.items():
            plugin_dev_of_core.setdefault(int(core_key) // node_cpd, str(entry.get("pod_name")))
    for idx in sorted(dev_owner):
        if idx in bad_devices:
            continue
        plugin = out.devices.get(str(idx))
        holder = str(plugin.get("pod_name")) if plugin else plugin_dev_of_core.get(idx)
        if holder is None:
            holder = next((str(out.cores[str(c)].get("pod_name")) for c in dev_cores[idx] if str(c) in out.cores), None)
        if holder is not None:
            bad_devices[idx] = (
                f"device {idx} is held through the device plugin (pod {holder}) and through claim "
                f"{_name(dev_owner[idx].claim)}"
            )
    for idx, why in sorted(bad_devices.items()):
        out.dra_conflicts.append(why)
        out.devices.pop(str(idx), None)
        for core in dev_cores.get(idx, range(0)):
            out.cores.pop(str(core), None)
        if node_cpd:
            for core in range(idx * node_cpd, (idx + 1) * node_cpd):
                out.cores.pop(str(core), None)
    for idx, owner in dev_owner.items():
        if idx in bad_devices:
            continue
        entry = owner.entry()
        out.devices[str(idx)] = entry
        for core in dev_cores[idx]:
            out.cores[str(core)] = entry
    out.cores = dict(sorted(out.cores.items(), key=lambda kv: int(kv[0])))
    out.devices = dict(sorted(out.devices.items(), key=lambda kv: int(kv[0])))


def _name(claim: tuple[str, str]) -> str:
    return f"{claim[0]}/{claim[1]}"
