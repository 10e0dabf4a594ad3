"""Background watcher that keeps the report's ``neuron_k8s_info`` object current.

Reads: the kubelet pod-resources API (List, GetAllocatableResources) every ``refresh`` seconds, in its own
thread. Returns: ``snapshot()``, the complete ``neuron_k8s_info`` object as AWS documents it::

    {"period": <seconds between the last two refreshes>,
     "neuroncores_k8s_info": {"<core>": {"pod_name", "namespace", "container_name": [...]}},
     "neurondevices_k8s_info": {"<device>": {...}},
     "error": ""}

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

from neuron_monitor.k8s.attribution import attribute, cores_per_device_from
from neuron_monitor.k8s.podresources import (
    DEFAULT_SOCKET,
    ContainerDevices,
    PodResources,
    PodResourcesClient,
    PodResourcesError,
)

log = logging.getLogger("neuron_monitor.k8s")

NOT_READ_YET = "pod-resources not read yet"


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
    ) -> None:
        if refresh <= 0:
            raise ValueError("refresh must be positive")
        self.socket_path = socket_path
        self.refresh = refresh
        self.keep_last_good = 3 * refresh if keep_last_good is None else keep_last_good
        self.call_timeout = min(5.0, refresh) if call_timeout is None else call_timeout
        self._cores_per_device = cores_per_device
        self._inferred_cpd: int | None = None
        self._source: PodResourcesSource | None = None
        self._published = _k8s_info(0.0, {}, {}, NOT_READ_YET)
        self._last_good: tuple[float, dict[str, Any], dict[str, Any]] | None = None
        self._last_refresh = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.stats = {"refreshes": 0, "failures": 0, "skipped_ids": 0, "conflicts": 0, "shared_devices": 0}

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
            cores, devices = self._read()
            self._last_good = (now, cores, devices)
            published = _k8s_info(period, cores, devices, "")
        except PodResourcesError as e:
            published = self._failed(now, period, str(e))
        except Exception as e:  # never let the thread die: report it and try again next period
            published = self._failed(now, period, f"pod-resources refresh failed: {type(e).__name__}: {e}")
        self._published = published
        self.stats["refreshes"] += 1  # counted once published, so a reader never sees a refresh still in flight
        return published

    def _read(self) -> tuple[dict[str, Any], dict[str, Any]]:
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
        result = attribute(pods, cpd)
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
        return result.cores, result.devices

    def _failed(self, now: float, period: float, reason: str) -> dict[str, Any]:
        self.stats["failures"] += 1
        log.info("%s", reason)
        if self._last_good is not None:
            taken, cores, devices = self._last_good
            age = now - taken
            if age <= self.keep_last_good:
                return _k8s_info(period, cores, devices, f"{reason}; showing the mapping read {age:.0f}s ago")
            self._last_good = None
        return _k8s_info(period, {}, {}, reason)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.refresh_once()
            self._stop.wait(self.refresh)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m neuron_monitor.k8s.pod_info",
        description="Read the kubelet pod-resources API once and print the neuron_k8s_info object.",
    )
    parser.add_argument("--pod-resources-socket", default=DEFAULT_SOCKET, help="kubelet pod-resources socket")
    parser.add_argument("--cores-per-device", type=int, default=None, help="logical NeuronCores per device")
    args = parser.parse_args(argv)
    if args.cores_per_device is not None and args.cores_per_device <= 0:
        parser.error("--cores-per-device must be a positive integer")
    watcher = PodInfoWatcher(args.pod_resources_socket, cores_per_device=args.cores_per_device)
    try:
        info = watcher.refresh_once()
    finally:
        watcher.close()
    sys.stdout.buffer.write(orjson.dumps(info, option=orjson.OPT_INDENT_2) + b"\n")
    if info["error"]:
        print(f"error: {info['error']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
