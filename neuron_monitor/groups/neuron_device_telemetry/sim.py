"""The simulator's part for ``neuron_device_telemetry`` (contract: sim/part.py): power, memory by category and the
per-core busy time and status counters the driver keeps, below each device's directory.

Files, per device (``<stats>`` is ``neuronN/stats``, or ``neuronN/metrics/stats`` before driver 2.8):

- ``<stats>/power/utilization`` (driver >= 2.21; layout ``regrouped``: ``neuronN/telemetry/power/utilization``),
  the driver's once-a-minute roll-up "STATUS,time,min,max,avg" from the runtimes' utilization; node family
  ``power``;
- ``<stats>/memory_usage/host_mem/<category>/{total,peak,present}`` and per physical core
  ``<core stats>/memory_usage/device_mem/<category>/...`` (categories by driver version, below) from the runtimes'
  memory; ``<core stats>/memory_usage/device_mem/{total,peak}``;
- per physical core ``<core stats>/other_info/{nc_time_in_use,inference_count,flop_count}/total`` and
  ``<core stats>/status/<counter>/total``, from what the driver counted (`Host.driver_counts`), rewritten at the
  sysfs interval. ``<core stats>`` is the core directory's ``stats`` (the base tree moves the core directories in
  layout ``moved-cores``).

Commands: ``power_no_data`` / ``power_valid`` (``device``), ``busy_without_runtime`` (``device``, ``core``,
``utilization``: a process without a data block keeps the core busy; 0 ends it).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from neuron_monitor.neuron import layout as L
from neuron_monitor.sim.part import Host, SimPart
from neuron_monitor.sim.tree import DeviceTree, InPlaceFile, ReopenedFile, TreeBuilder

# the driver's memory categories (device memory per core, host memory per device) and the driver version that
# added them: the basic ones with 2.10, the rest with 2.18
DEVICE_CATEGORIES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("model_code", (2, 10)), ("tensors", (2, 10)), ("constants", (2, 10)), ("model_shared_scratchpad", (2, 10)),
    ("runtime_memory", (2, 10)), ("driver_memory", (2, 18)), ("collectives", (2, 18)),
    ("nonshared_scratchpad", (2, 18)), ("notifications", (2, 18)), ("dma_rings", (2, 18)),
    ("uncategorized", (2, 18)),
)  # fmt: skip
HOST_CATEGORIES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("dma_buffers", (2, 10)), ("tensors", (2, 10)), ("constants", (2, 10)), ("application_memory", (2, 10)),
    ("driver_memory", (2, 18)), ("notifications", (2, 18)), ("dma_rings", (2, 18)), ("uncategorized", (2, 18)),
)  # fmt: skip
# per-core status counters (sysfs name) and the driver version that added them
STATUS_COUNTERS: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("success", (2, 7)), ("failure", (2, 7)), ("timeout", (2, 7)), ("exec_bad_input", (2, 7)), ("hw_error", (2, 7)),
    ("execute_completed_with_error", (2, 8)), ("execute_completed_with_num_error", (2, 8)),
    ("generic_error", (2, 7)), ("execute_failed_to_queue", (2, 8)), ("hw_repairable_hbm_ue_error", (2, 23)),
)  # fmt: skip
# where power/ lives in a reorganized layout, relative to the device directory (else below <stats>)
POWER_PARENT: dict[str, str] = {"regrouped": "telemetry"}
_KEPT = ("other_info/nc_time_in_use", "status/success", "memory_usage/device_mem")  # kept open: rewritten often

MemFiles = dict[str, tuple[ReopenedFile, ReopenedFile]]  # category -> (total, peak)


def _mem_files(builder: TreeBuilder, base: str, categories: tuple[tuple[str, tuple[int, ...]], ...],
               ver: tuple[int, ...]) -> MemFiles:  # fmt: skip
    out: MemFiles = {}
    for name, since in categories:
        if ver >= since:
            d = builder.make(f"{base}/{name}")
            builder.write(f"{d}/present", b"0\n")
            out[name] = (
                ReopenedFile(builder.new(f"{d}/total"), b"0\n"),
                ReopenedFile(builder.new(f"{d}/peak"), b"0\n"),
            )
    return out


class TelemetryNodes:
    """The group's files of one device."""

    def __init__(self, device: DeviceTree) -> None:
        builder, ver, name = device.builder, device.layout.ver, device.layout.name
        self.power: InPlaceFile | None = None
        if ver >= (2, 21) and "power" not in device.absent:
            parent = f"{device.top}/{POWER_PARENT[name]}" if name in POWER_PARENT else device.stats
            power = builder.make(f"{parent}/power")
            self.power = InPlaceFile(builder.new(f"{power}/utilization"), b"POWER_STATUS_NO_DATA,0,0.00,0.00,0.00\n")
        self.host_mem = _mem_files(builder, f"{device.stats}/memory_usage/host_mem", HOST_CATEGORIES, ver)
        self.status_names = [n for n, since in STATUS_COUNTERS if ver >= since]
        self.core_mem: list[MemFiles] = []
        self.core_files: list[dict[str, InPlaceFile | ReopenedFile]] = []
        rels = ["other_info/nc_time_in_use", "other_info/inference_count", "other_info/flop_count",
                "memory_usage/device_mem", *(f"status/{n}" for n in self.status_names)]  # fmt: skip
        for st in device.core_stats:
            files: dict[str, InPlaceFile | ReopenedFile] = {}
            self.core_mem.append(_mem_files(builder, f"{st}/memory_usage/device_mem", DEVICE_CATEGORIES, ver))
            for rel in rels:
                d = builder.make(f"{st}/{rel}")
                files[rel] = (InPlaceFile if rel in _KEPT else ReopenedFile)(builder.new(f"{d}/total"), b"0\n")
                if rel == "memory_usage/device_mem":
                    builder.write(f"{d}/peak", b"0\n")
            self.core_files.append(files)

    def close(self) -> None:
        kept: list[InPlaceFile | ReopenedFile | None] = [self.power]
        for files in self.core_files:
            kept += files.values()
        for f in kept:
            if f is not None:
                f.close()


class TelemetryPart(SimPart):
    commands = ("power_no_data", "power_valid", "busy_without_runtime")
    node_families = ("power",)

    def __init__(self, name: str, host: Host) -> None:
        super().__init__(name, host)
        self.power_no_data: set[int] = set()
        self.power_lines: dict[int, str] = {}
        self._power_minute = -1
        self.orphan_busy: dict[tuple[int, int], float] = {}  # (device, core) -> utilization without data block
        self._orphan_acc: dict[tuple[int, int], float] = {}
        self.mem_peak: dict[tuple[int, int, str], int] = {}  # (device, core or -1 for host, category) -> peak
        self._device_category = {ctr: n for n, ctr in L.DEVICE_MEM_COUNTERS}
        self._host_category = {ctr: n for n, ctr in L.HOST_MEM_COUNTERS}

    @classmethod
    def device_nodes(cls, device: DeviceTree) -> TelemetryNodes:
        return TelemetryNodes(device)

    def step(self, now: float, dt: float) -> None:
        """Busy time of processes with no readable data block: the driver counts it, no runtime reports it."""
        if not self.orphan_busy or not self.host.live_counters:
            return
        for (dev, core), utilization in self.orphan_busy.items():
            acc = self._orphan_acc.get((dev, core), 0.0) + utilization * dt * 1e6
            k = int(acc)
            self._orphan_acc[(dev, core)] = acc - k
            self.host.add_driver_count(dev, core, "nc_time_in_use", k)

    def write(self, now: float) -> None:
        counts = self.host.driver_counts
        for dev in range(len(self.host.devices)):
            if dev in self.host.removed_devices:
                continue
            nodes: TelemetryNodes = self.nodes(dev)
            for core, files in enumerate(nodes.core_files):
                files["other_info/nc_time_in_use"].write(b"%d\n" % counts.get((dev, core, "nc_time_in_use"), 0))
                for name in nodes.status_names:
                    files[f"status/{name}"].write(b"%d\n" % counts.get((dev, core, name), 0))
        self._write_power()

    def device_changed(self, device: int) -> None:
        """Memory by category from the runtimes attached to the device."""
        if device in self.host.removed_devices:
            return
        nodes: TelemetryNodes = self.nodes(device)
        owners = self.host.owners(device)
        for core, files in enumerate(nodes.core_files):
            total = 0
            by_cat: dict[str, int] = {}
            for rt in owners:
                for ctr, size in rt.core_mem.get((device, core), {}).items():
                    total += size
                    cat = self._device_category.get(ctr, "uncategorized")
                    by_cat[cat] = by_cat.get(cat, 0) + size
            files["memory_usage/device_mem"].write(b"%d\n" % total)
            self._write_mem(nodes.core_mem[core], device, core, by_cat)
        host: dict[str, int] = {}
        for rt in owners:
            for ctr, size in rt.host_mem.get(device, {}).items():
                cat = self._host_category.get(ctr, "uncategorized")
                host[cat] = host.get(cat, 0) + size
        self._write_mem(nodes.host_mem, device, -1, host)

    def _write_mem(self, files: MemFiles, dev: int, core: int, by_cat: dict[str, int]) -> None:
        for cat, (total_f, peak_f) in files.items():
            used = by_cat.get(cat, 0)
            peak = max(used, self.mem_peak.get((dev, core, cat), 0))
            self.mem_peak[(dev, core, cat)] = peak
            total_f.write(b"%d\n" % used)
            peak_f.write(b"%d\n" % peak)

    def _write_power(self, force: bool = False) -> None:
        """The driver's once-a-minute power roll-up: rewritten when the wall-clock minute changes."""
        minute = int(self.host.wall_clock() // 60)
        if minute == self._power_minute and not force:
            return
        self._power_minute = minute
        shape = self.host.shape
        for dev in range(len(self.host.devices)):
            power = self.nodes(dev).power
            if power is None or dev in self.host.removed_devices:
                continue
            if dev in self.power_no_data:
                line = f"POWER_STATUS_NO_DATA,{minute * 60},0.00,0.00,0.00"
            else:
                running = [rt for rt in self.host.runtimes if rt.state == "running"]
                busy = sum(rt.plan.utilization * rt.activity * len(rt.plan.cores.get(dev, ())) for rt in running)
                util = busy / max(1, shape.phys_cores)
                avg = min(95.0, 10.0 + 70.0 * util)
                line = f"POWER_STATUS_VALID,{minute * 60},{max(0.0, avg - 5):.2f},{min(100.0, avg + 5):.2f},{avg:.2f}"
            self.power_lines[dev] = line
            power.write(line.encode() + b"\n")

    def apply(self, kind: str, command: dict[str, Any], detail: dict[str, Any]) -> str:
        dev, error = self.device_of(command, detail)
        if error:
            return error
        if kind in ("power_no_data", "power_valid"):
            if self.nodes(dev).power is None:
                return f"driver {self.host.layout.label} exposes no power utilization"
            (self.power_no_data.add if kind == "power_no_data" else self.power_no_data.discard)(dev)
            self._write_power(force=True)
            return ""
        core = int(command.get("core", 0))  # busy_without_runtime
        if not 0 <= core < self.host.shape.phys_cores:
            return f"no core {core}"
        utilization = float(command.get("utilization", 0.5))
        if utilization > 0:
            self.orphan_busy[(dev, core)] = min(1.0, utilization)
        else:
            self.orphan_busy.pop((dev, core), None)
        detail.update(core=core, utilization=utilization)
        return ""

    def remove_nodes(self, device: int, family: str) -> None:
        nodes: TelemetryNodes = self.nodes(device)
        if nodes.power is not None:
            with contextlib.suppress(OSError):
                os.unlink(nodes.power.path)
            with contextlib.suppress(OSError):  # power/ goes too
                os.rmdir(os.path.dirname(nodes.power.path))
            nodes.power.close()
            nodes.power = None
        self.power_lines.pop(device, None)

    def totals(self) -> dict[str, Any]:
        return {"power": {str(d): line for d, line in self.power_lines.items()}}


PART = TelemetryPart
