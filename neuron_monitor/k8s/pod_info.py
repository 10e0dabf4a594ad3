"""Background watcher that keeps the report's ``neuron_k8s_info`` object current.

Reads: the kubelet pod-resources API (List, GetAllocatableResources) every ``refresh`` seconds, in its own
thread, and for DRA claims of the ``dra_driver`` (``neuron.aws.com``) the API server's ResourceSlices and
ResourceClaims when a ``DraDirectory`` is given (dra.py). Returns: ``snapshot()``, the complete
``neuron_k8s_info`` object as AWS documents it, entries from DRA claims with three keys more::

    {"period": <seconds between the last two refreshes>,
     "neuroncores_k8s_info": {"<core>": {"pod_name", "namespace", "container_name": [...],
                                         "pod_uid", "claim_name", "claim_namespace"}},
     "neurondevices_k8s_info": {"<device>": {...}},
     "error": ""}

A claimed device's index is its ResourceSlice ``deviceId`` when the API server answers, else the index in its
name (``neurondeviceN``, ``neuron-device-N``); a device with neither, a device held two ways (device plugin and
claim, or two claims) and an API server that fails are named in ``error`` while every other entry is kept.

``snapshot()`` never does I/O and never blocks on the kubelet: it returns the object published by the last
refresh (a fresh top-level dict; the inner maps are shared and must be treated as read-only). When a refresh
fails (socket missing, kubelet down, bad response) ``error`` says why; the last good mapping is kept for
``keep_last_good`` seconds (default three refresh periods) so that a kubelet restart does not make pod labels
flap, and dropped after that so that cores are never attributed to pods that may be long gone.
Cores per device come from the caller (``neuroncore_per_device_count``) or else from the node's allocatable
resources.

Run ``python3 -m neuron_monitor.k8s.pod_info`` to print one snapshot (exit 1 when ``error`` is not empty).
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from typing import Any, Protocol

import orjson

from neuron_monitor.k8s.attribution import DraDevice, attribute, cores_per_device_from
from neuron_monitor.k8s.dra import (
    NEURON_DRA_DRIVER,
    NODE_RESOURCE_TYPE,
    DraDirectory,
    efa_addresses,
    index_from_name,
)
from neuron_monitor.k8s.kubeapi import one_line
from neuron_monitor.k8s.options import add_dra_arguments, dra_directory
from neuron_monitor.k8s.podresources import (
    DEFAULT_SOCKET,
    ContainerDevices,
    PodResources,
    PodResourcesClient,
    PodResourcesError,
)
from neuron_monitor.neuron.pci import set_dra_efa_addresses
from neuron_monitor.util.ratelimit import LogRateLimit, held_back
from neuron_monitor.util.sanitize import sanitize

log = logging.getLogger("neuron_monitor.k8s")

NOT_READ_YET = "pod-resources not read yet"
MAX_ERROR_ITEMS = 3


class PodResourcesSource(Protocol):
    def list_pods(self) -> list[PodResources]: ...
    def allocatable(self) -> list[ContainerDevices] | None: ...
    def close(self) -> None: ...


def _k8s_info(period: float, cores: dict[str, Any], devices: dict[str, Any], error: str) -> dict[str, Any]:
    return {
        "period": period,
        "neuroncores_k8s_info": cores,
        "neurondevices_k8s_info": devices,
        "error": error,
    }


class PodInfoWatcher:
    """Refreshes the pod -> NeuronCore/device mapping in a daemon thread; ``snapshot()`` is lock-free."""

    def __init__(
        self,
        socket_path: str = DEFAULT_SOCKET,
        refresh: float = 15.0,
        cores_per_device: int | None = None,
        keep_last_good: float | None = None,
        call_timeout: float | None = None,
        dra_driver: str = NEURON_DRA_DRIVER,
        directory: DraDirectory | None = None,
    ) -> None:
        if refresh <= 0:
            raise ValueError("refresh must be positive")
        self.socket_path = socket_path
        self.refresh = refresh
        self.keep_last_good = 3 * refresh if keep_last_good is None else keep_last_good
        self.call_timeout = min(5.0, refresh) if call_timeout is None else call_timeout
        self._cores_per_device = cores_per_device
        self._node_lnc: int | None = None
        self._device_count: int | None = None
        self.dra_driver = dra_driver
        self.directory = directory
        self._inferred_cpd: int | None = None
        self._dra_log = LogRateLimit(300.0)  # a DRA problem persists across refreshes: say it every 5 min
        self._source: PodResourcesSource | None = None
        self._published = _k8s_info(0.0, {}, {}, NOT_READ_YET)
        self._last_good: tuple[float, dict[str, Any], dict[str, Any], str] | None = None
        self._last_refresh = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.stats = {
            "refreshes": 0,
            "failures": 0,
            "skipped_ids": 0,
            "conflicts": 0,
            "shared_devices": 0,
            "dra_devices": 0,
            "dra_unresolved": 0,
            "dra_conflicts": 0,
        }

    # -- public API -------------------------------------------------------------------------------------
    def start(self) -> PodInfoWatcher:
        """Start the refresh thread (the first refresh runs at once, in that thread)."""
        if self._thread is None:
            self._last_refresh = time.monotonic()
            self._thread = threading.Thread(target=self._run, name="neuron-k8s-info", daemon=True)
            self._thread.start()
        return self

    def snapshot(self) -> dict[str, Any]:
        """The current ``neuron_k8s_info`` object (no I/O, no locking: the published dict is replaced whole)."""
        return dict(self._published)

    def set_cores_per_device(self, cores_per_device: int | None) -> None:
        """Tell the watcher the logical cores per device (from neuron_hardware_info); used from the next refresh."""
        self._cores_per_device = cores_per_device

    def set_node_shape(self, device_count: int | None, logical_core_config: int | None) -> None:
        """The node's device count and LNC (neuron_hardware_info): a claim at another LNC has
        ``cores_per_device * node LNC / claim LNC`` cores per device; an UltraServer node device covers them all."""
        self._device_count = device_count or None
        self._node_lnc = logical_core_config or None

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.call_timeout + 1.0)
            self._thread = None
        if self._source is not None:
            self._source.close()
            self._source = None

    def __enter__(self) -> PodInfoWatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- refresh ----------------------------------------------------------------------------------------
    def refresh_once(self) -> dict[str, Any]:
        """Read the kubelet once and publish the result; returns the published object. Never raises."""
        now = time.monotonic()
        period = now - self._last_refresh
        self._last_refresh = now
        try:
            cores, devices, error = self._read()
            self._last_good = (now, cores, devices, error)
            published = _k8s_info(period, cores, devices, error)
        except PodResourcesError as e:
            published = self._failed(now, period, str(e))
        except Exception as e:  # never let the thread die: report it and try again next period
            published = self._failed(now, period, f"pod-resources refresh failed: {type(e).__name__}: {e}")
        self._published = published
        self.stats["refreshes"] += 1  # counted once published, so a reader never sees a refresh still in flight
        return published

    def _read(self) -> tuple[dict[str, Any], dict[str, Any], str]:
        if self._source is None:
            self._source = PodResourcesClient(self.socket_path, timeout=self.call_timeout)
        pods = self._source.list_pods()
        cpd = self._cores_per_device
        if cpd is None:
            try:
                inferred = cores_per_device_from(self._source.allocatable())
            except PodResourcesError as e:
                log.info("GetAllocatableResources failed, keeping the previous cores per device: %s", e)
            else:
                self._inferred_cpd = inferred or self._inferred_cpd
            cpd = self._inferred_cpd
        dra, problems = self._dra_devices(pods, cpd)
        result = attribute(pods, cpd, dra=dra)
        if result.skipped_ids:
            self.stats["skipped_ids"] += len(result.skipped_ids)
            log.warning(
                "pod-resources: skipped %d device IDs that are not plain indices, e.g. %s",
                len(result.skipped_ids),
                ", ".join(result.skipped_ids[:3]),
            )
        if result.conflicts:
            self.stats["conflicts"] += result.conflicts
            log.warning("pod-resources: %d indices claimed by more than one pod", result.conflicts)
        self.stats["shared_devices"] = len(result.shared_devices)
        if result.dra_conflicts:
            self.stats["dra_conflicts"] += len(result.dra_conflicts)
        problems += [f"not attributed: {c}" for c in result.dra_conflicts]
        if problems and (n := self._dra_log.hit()) is not None:
            log.warning("DRA: %s%s", _joined(problems), held_back(n, "refreshes with problems"))
        return result.cores, result.devices, _joined(problems)

    def _dra_devices(self, pods: list[PodResources], cpd: int | None) -> tuple[list[DraDevice], list[str]]:
        """The devices of ``dra_driver`` claims, resolved to indices, and what could not be resolved."""
        held = [
            (pod, container, dyn, res)
            for pod in pods
            for container in pod.containers
            for dyn in container.dynamic_resources
            for res in dyn.claim_resources
            if res.driver_name == self.dra_driver
        ]
        directory = self.directory
        if directory is not None:
            directory.begin()
            directory.forget_claims_except({(d.claim_namespace or p.namespace, d.claim_name) for p, _, d, _ in held})
        if not held:
            return [], []  # no claim of the driver: the API server is not asked (nor the EFA addresses updated)
        slices = directory.slice_devices() if directory is not None else {}
        if directory is not None:
            set_dra_efa_addresses(efa_addresses(slices))  # the EFA join's second source (neuron/pci.py)
        listed_again = False
        physical = cpd * self._node_lnc if cpd and self._node_lnc else None
        out: list[DraDevice] = []
        problems: list[str] = []
        for pod, container, dyn, res in held:
            claim = (dyn.claim_namespace or pod.namespace, dyn.claim_name)
            key = (res.pool_name, res.device_name)
            found = slices.get(key)
            if found is None and directory is not None and not listed_again:
                slices, listed_again = directory.slice_devices(stale=True), True
                found = slices.get(key)
            details = directory.claim(*claim) if directory is not None else None
            if details is not None and (res.driver_name, *key) in details.admin:
                continue  # admin access (e.g. a monitoring pod) observes the device; it does not own it
            indices: range | list[int] | None
            if found is not None and found.resource_type == NODE_RESOURCE_TYPE:
                indices = range(self._device_count) if self._device_count else None
            elif found is not None and found.device_id is not None:
                indices = [found.device_id]
            else:
                idx = index_from_name(res.device_name)
                indices = None if idx is None else [idx]
            if indices is None:
                if found is not None and found.resource_type == NODE_RESOURCE_TYPE:
                    why = "an UltraServer node device, and the node's device count is unknown"
                elif directory is None:
                    why = "no device index (API server not used, no index in its name)"
                else:
                    why = "no device index (no deviceId in ResourceSlices, no index in its name)"
                problems.append(
                    f"claim {one_line(claim[0])}/{one_line(claim[1])}: device {one_line(res.device_name)!r} of pool "
                    f"{one_line(res.pool_name)!r} has {why}"
                )
                continue
            lnc = details.lnc.get((res.driver_name, *key)) if details is not None else None
            claim_cpd = physical // lnc if lnc and physical and physical % lnc == 0 else None
            uid = details.pod_uids.get(pod.name, "") if details is not None else ""
            out.extend(DraDevice(i, claim, pod.name, container.name, uid, claim_cpd) for i in indices)
        problems = list(dict.fromkeys(problems))  # one line per device, however many containers share it
        self.stats["dra_devices"] = len(out)
        self.stats["dra_unresolved"] += len(problems)
        if directory is not None:
            problems = [f"API server: {e}" for e in directory.errors] + problems
        return out, problems

    def _failed(self, now: float, period: float, reason: str) -> dict[str, Any]:
        self.stats["failures"] += 1
        log.info("%s", reason)
        if self._last_good is not None:
            taken, cores, devices, _ = self._last_good
            age = now - taken
            if age <= self.keep_last_good:
                return _k8s_info(period, cores, devices, f"{reason}; showing the mapping read {age:.0f}s ago")
            self._last_good = None
        return _k8s_info(period, {}, {}, reason)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.refresh_once()
            self._stop.wait(self.refresh)


def _joined(problems: list[str]) -> str:
    """Up to MAX_ERROR_ITEMS problems on one line, with the count of the rest."""
    if not problems:
        return ""
    text = "; ".join(problems[:MAX_ERROR_ITEMS])
    if len(problems) > MAX_ERROR_ITEMS:
        text += f"; and {len(problems) - MAX_ERROR_ITEMS} more"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m neuron_monitor.k8s.pod_info",
        description="Read the kubelet pod-resources API once and print the neuron_k8s_info object.",
    )
    parser.add_argument("--pod-resources-socket", default=DEFAULT_SOCKET, help="kubelet pod-resources socket")
    parser.add_argument("--cores-per-device", type=int, default=None, help="logical NeuronCores per device")
    parser.add_argument("--lnc", type=int, default=None, help="the node's logical NeuronCore config (1 or 2)")
    parser.add_argument("--device-count", type=int, default=None, help="Neuron devices on the node")
    add_dra_arguments(parser)
    args = parser.parse_args(argv)
    for name in ("cores_per_device", "lnc", "device_count"):
        if getattr(args, name) is not None and getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer")
    try:
        directory = dra_directory(args)
    except ValueError as e:
        parser.error(str(e))
    watcher = PodInfoWatcher(
        args.pod_resources_socket,
        cores_per_device=args.cores_per_device,
        dra_driver=args.dra_driver,
        directory=directory,
    )
    watcher.set_node_shape(args.device_count, args.lnc)
    try:
        info = watcher.refresh_once()
    finally:
        watcher.close()
    sys.stdout.buffer.write(orjson.dumps(info, option=orjson.OPT_INDENT_2) + b"\n")
    if info["error"]:
        print(f"error: {sanitize(info['error'])}", file=sys.stderr)  # the kubelet's and API server's words
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
