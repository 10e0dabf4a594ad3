"""Reader of the Neuron driver's sysfs tree under the root (facts and public sources: docs/neuron-data.md).

`DriverTree(root)` finds the devices (``sys/class/neuron_device/neuronN``), their physical NeuronCores
(``neuron_coreK`` directories, else ``core_count``), architecture strings, the driver version
(``sys/module/neuron/version``) and where each device's ``stats`` directory lives (``neuronN/stats``, or
``neuronN/metrics/stats`` on drivers before 2.8). It returns plain values and raises OSError when a file is
missing; callers decide what that means.

The device listing is taken at most once a second while reports come faster (`DEVICE_LISTING_MAX_AGE`, within
collections the scheduler begins with its clock): a device the driver adds shows up in the report within a second,
and one that vanishes leaves the listing within a second, sooner when a reader saw its reads fail: the application
source drops the kept listing when listing a device's applications or opening a listed device fails
(`DriverTree.forget_listing`), so the next collection lists the devices again. At report periods of a second or
more every collection lists them, as before.
"""

from __future__ import annotations

import re
from typing import Any

from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import nodes
from neuron_monitor.neuron.discovery import DISCOVERED, NONE, DeviceNodes, Found
from neuron_monitor.neuron.nodes import Node
from neuron_monitor.util.ranges import device_ranges

CLASS_DIR = "sys/class/neuron_device"
DEVICES_DIR = "sys/devices/virtual/neuron_device"
_DEVICE_NAME = re.compile(r"neuron(\d+)$")
_CORE_NAME = re.compile(r"neuron_core(\d+)$")
DEVICE_LISTING_MAX_AGE = 1.0  # seconds a device listing is used again by later collections (see above)


def parse_driver_version(text: str) -> tuple[int, ...] | None:
    m = re.match(r"\s*(\d+(?:\.\d+)*)", text)
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


class DriverTree:
    def __init__(self, root: RootFS) -> None:
        self.root = root
        self._dirs = (CLASS_DIR, DEVICES_DIR)
        self._listed: tuple[list[str], tuple[int, ...]] = ([], ())  # the last listing and what it gave
        self._nodes: dict[int, DeviceNodes] = {}  # device -> where its nodes are (kept until forgotten)
        self._sources: tuple[tuple[int, ...], int, dict[str, Any]] | None = None  # summary, for which state
        self._finds = 0  # lookups made (the summary is made again when this moved)
        self._problems: tuple[tuple[tuple[int, ...], int], list[str]] | None = None  # (devices, finds) -> texts

    def device_indexes(self) -> tuple[int, ...]:
        """Indexes of the devices present now, ascending; () when the driver is not loaded."""
        for rel in self._dirs:
            try:
                names = self.root.listdir(rel, DEVICE_LISTING_MAX_AGE)  # shared with the other readers
            except OSError:
                continue
            if names == self._listed[0]:
                found = self._listed[1]
            else:
                found = tuple(sorted(int(m.group(1)) for n in names if (m := _DEVICE_NAME.match(n))))
                self._listed = (names, found)
                for gone in set(self._nodes) - set(found):  # back later: its nodes are looked for again
                    del self._nodes[gone]
                    self._finds += 1  # what was found changed: the kept summaries (`sources`, `problems`) are old
            if found:
                return found
        return ()

    def forget_listing(self) -> None:
        """List the devices again at the next collection (a device's read failed: it may have gone)."""
        for rel in self._dirs:
            self.root.forget_listing(rel)

    def device_rel(self, index: int) -> str:
        return f"{CLASS_DIR}/neuron{index}"

    # -- the nodes ----------------------------------------------------------------------------------------------
    def nodes(self, index: int) -> DeviceNodes:
        """Where device ``index``'s nodes are (found on first use, kept until `forget`)."""
        got = self._nodes.get(index)
        if got is None:
            got = self._nodes[index] = DeviceNodes(self.root, self.device_rel(index))
        return got

    def find(self, index: int, node: Node, core: int = -1) -> Found:
        """Where ``node`` of device ``index`` (of its physical core ``core``) is; ``rel`` None when not found."""
        self._finds += 1
        return self.nodes(index).find(node, core)

    def forget(self, index: int | None = None) -> None:
        """Look for device ``index``'s nodes again (every device's when None): one of them vanished or failed.
        What each node was last found to be stays in `sources` until it is looked up again."""
        for i, device_nodes in self._nodes.items():
            if index is None or i == index:
                device_nodes.reset()
        self._finds += 1

    def sources(self, devices: tuple[int, ...] | None = None) -> dict[str, Any]:
        """What this reader's lookups found on ``devices`` (default: those listed now): ``{"layout":
        "known:<name>" | "discovered" | "none", "found": {family: bool}}``, a family true only when found on every
        device (and every physical core) it was looked for on."""
        if devices is None:
            devices = self._listed[1]
        kept = self._sources
        if kept is not None and kept[0] == devices and kept[1] == self._finds:
            return kept[2]
        found: dict[str, bool] = {}
        hows: set[str] = set()
        for device in devices:
            nodes = self._nodes.get(device)
            for (node, _), f in nodes.found.items() if nodes is not None else ():
                ok = f.rel is not None
                found[node.family] = found.get(node.family, True) and ok
                if ok:
                    hows.add(f.how)
        layout = DISCOVERED if DISCOVERED in hows else min(hows) if hows else NONE
        summary = {"layout": layout, "found": dict(sorted(found.items()))}
        self._sources = (devices, self._finds, summary)
        return summary

    def problems(self, devices: tuple[int, ...] | list[int]) -> list[str]:
        """Why nodes that are there were not used (two candidates, a search cut short), one text per node and
        problem, naming the devices."""
        key = (tuple(devices), self._finds)
        if self._problems is not None and self._problems[0] == key:
            return list(self._problems[1])
        by: dict[tuple[str, str], list[int]] = {}
        for device in devices:
            nodes = self._nodes.get(device)
            for (node, _), f in nodes.found.items() if nodes is not None else ():
                if f.problem and device not in by.setdefault((node.family, f.problem), []):
                    by[(node.family, f.problem)].append(device)
        found = [
            f"{family} of neuron_device {device_ranges(sorted(devs))}: {problem}"
            for (family, problem), devs in by.items()
        ]
        self._problems = (key, found)
        return list(found)

    def stats_rel(self, index: int) -> str:
        """The device's stats directory in its known layout (``neuronN/stats`` when none is recognized)."""
        layout = self.nodes(index).layout
        return f"{self.device_rel(index)}/{layout.stats if layout is not None else 'stats'}"

    def phys_cores(self, index: int) -> int:
        try:
            names = self.root.listdir(self.device_rel(index))
        except OSError:
            names = []
        cores = sum(1 for n in names if _CORE_NAME.match(n))
        if cores:
            return cores
        try:
            return int(self.root.read_text(f"{self.device_rel(index)}/core_count").strip())
        except (OSError, ValueError):
            found = self.nodes(index).cores()  # a driver that moved its core directories
            if not found:
                raise
            return len(found)

    def device_name(self, index: int) -> str:
        """``info/architecture/device_name`` (e.g. "Trainium2"); "" when not found or unreadable."""
        rel = self.find(index, nodes.DEVICE_NAME).rel
        try:
            return self.root.read_text(rel).strip()[:64] if rel is not None else ""
        except OSError:
            return ""

    def arch(self, index: int) -> tuple[str, str, str]:
        """(device_name, device arch_type, core arch_type), e.g. ("Trainium2", "NDv3", "NCv3"); "" if absent.
        Found where the known layout puts them, else by the device's search."""
        out = []
        for node, core in ((nodes.DEVICE_NAME, -1), (nodes.DEVICE_ARCH, -1), (nodes.CORE_ARCH, 0)):
            rel = self.find(index, node, core).rel
            try:
                out.append(self.root.read_text(rel).strip() if rel is not None else "")
            except OSError:
                out.append("")
        return out[0], out[1], out[2]

    def driver_version(self) -> tuple[int, ...] | None:
        try:
            return parse_driver_version(self.root.read_text("sys/module/neuron/version"))
        except OSError:
            return None
