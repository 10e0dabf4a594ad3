"""The simulator's animation: runtimes start and stop, execute, fail, move memory; ECC events arrive.

`Simulator(root, shape, runtimes, seed, options)` builds the tree (tree.py: the host's and each device's own files,
and through them every group's simulator part, ``groups/<name>/sim.py``, see part.py), starts the initial runtimes
(real worker processes) and then, every ``step`` seconds, advances every runtime's counters in its NDS slab,
rewrites the ioctl files when the application lists change, steps the parts, and appends ground truth. The simulator
keeps the workload, the clock, the ground truth and the control file; the groups' parts keep their files. Control
commands (appended by tests to ``run/neuron-sim/control.jsonl``) and scheduled faults are applied at step
boundaries: a command is the workload's (`WORKLOAD_COMMANDS`) or a device's (`DEVICE_COMMANDS`), or else the part
that names its kind answers it (two answers to one kind: the simulator refuses to start). The options are documented
on `TemporarySimulator` (temporary.py).
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neuron_monitor.neuron import layout as L
from neuron_monitor.sim.datastore import AppEntry, IoctlFile, SlabWriter
from neuron_monitor.sim.ground_truth import GROUND_TRUTH_FILE, GroundTruthWriter
from neuron_monitor.sim.layouts import DriverLayout, default_driver, driver_layout
from neuron_monitor.sim.part import SimPart, node_families, parts
from neuron_monitor.sim.runtime import COUNTER_INDEX, Runtime
from neuron_monitor.sim.shapes import Shape
from neuron_monitor.sim.tree import DeviceTree, TreeBuilder, write_host_files
from neuron_monitor.sim.workers import spawn_worker, stop_worker
from neuron_monitor.sim.workload import Activity, RuntimePlan, plan_runtimes

__all__ = ["CONTROL_FILE", "Runtime", "Simulator", "command_kinds", "default_driver"]

CONTROL_FILE = "run/neuron-sim/control.jsonl"
HOST_NAMES = {ctr: name for name, ctr in L.HOST_MEM_COUNTERS}
CORE_NAMES = {ctr: name for name, ctr in L.DEVICE_MEM_COUNTERS}
# the workload's commands: errors added to a runtime (kind -> ground truth counters), and the runtimes' lifecycle
ERROR_BURSTS: dict[str, tuple[str, ...]] = {
    "numerical_burst": ("completed_with_num_err", "numerical"),
    "hardware_error": ("completed_with_err", "hardware"),
    "timeouts": ("timed_out",),
    "failed_to_queue_burst": ("failed_to_queue",),
    "generic_errors": ("generic",),
}
WORKLOAD_COMMANDS = (*ERROR_BURSTS, "stop_runtime", "hang_runtime", "resume_runtime", "pause", "resume",
                     "start_runtime", "set_rate")  # fmt: skip
# a device's own events, which every part hears
DEVICE_COMMANDS = ("remove_device", "reset_device", "remove_nodes")


def command_kinds() -> tuple[str, ...]:
    """Every command kind the simulator answers: the workload's, the devices', and each group part's."""
    return (*WORKLOAD_COMMANDS, *DEVICE_COMMANDS, *(k for _, part in parts() for k in part.commands))


# the per-core sysfs files fed by the datastore counters (status counters and busy time)
SYSFS_CORE_NAMES: dict[int, str] = {
    L.NC_TIME_IN_USE: "nc_time_in_use", L.NC_INFER_COMPLETED: "success",
    L.NC_COMPLETED_WITH_ERR: "execute_completed_with_error",
    L.NC_COMPLETED_WITH_NUM_ERR: "execute_completed_with_num_error",
    L.NC_TIMED_OUT: "timeout", L.NC_INCORRECT_INPUT: "exec_bad_input", L.NC_FAILED_TO_QUEUE: "execute_failed_to_queue",
    L.NC_ERR_GENERIC: "generic_error", L.NC_ERR_HW: "hw_error",
}  # fmt: skip
WAKE_SECONDS = 0.1  # the longest sleep between checks for a stop request


def _absent_nodes(value: Any, devices: int) -> dict[int, frozenset[str]]:
    """Option ``absent_nodes`` ({device: [node family, ...]}: families the tree is built without) by device;
    ValueError names what is wrong."""
    if not value:
        return {}
    known = node_families()
    if not isinstance(value, dict):
        raise ValueError("option absent_nodes: expected an object {device: [node family, ...]}")
    out: dict[int, frozenset[str]] = {}
    for key, families in value.items():
        if not str(key).isdigit() or not 0 <= int(key) < devices:
            raise ValueError(f"option absent_nodes: no device {key!r} (0..{devices - 1})")
        if not isinstance(families, list) or any(f not in known for f in families):
            raise ValueError(f"option absent_nodes: device {key}: list node families among {', '.join(sorted(known))}")
        out[int(key)] = frozenset(families)
    return out


class Simulator:
    def __init__(self, root: Path, shape: Shape, runtimes: int, seed: int, options: dict[str, Any]) -> None:
        self.root = root
        self.shape = shape
        self.seed = seed
        self.options = options
        self.rng = random.Random(seed)
        self.step_s = float(options.get("step", 0.05))
        self.truth_interval = float(options.get("truth_interval", 1.0))
        self.memory_interval = float(options.get("memory_interval", 5.0))
        self.sysfs_interval = float(options.get("sysfs_interval", 1.0))  # rewrites of the per-core sysfs counters
        self.burn = int(options.get("worker_cpu", 1000))
        self.load_time = float(options.get("load_time", 0.5))
        self.slot_policy = str(options.get("slot_policy", "round_robin"))
        self.vary = bool(options.get("vary", False))  # phases, bursts and idle gaps (workload.Activity)
        self._activity: dict[int, Activity] = {}
        self.layout: DriverLayout = driver_layout(options.get("driver"), shape)
        self.driver = self.layout.version
        self.live_counters = self.layout.ver >= (2, 30)
        absent = _absent_nodes(options.get("absent_nodes"), shape.devices)
        family_default_lnc = 2 if shape.nc_arch in ("NCv3", "NCv4") else 1
        self.builder = builder = TreeBuilder()  # each directory made once; its remove() undoes the tree
        write_host_files(root, shape, self.layout, family_default_lnc, builder)
        self.devices = [
            DeviceTree(root, shape, i, self.layout, builder, absent.get(i, frozenset())) for i in range(shape.devices)
        ]
        self.removed_devices: set[int] = set()
        # what the driver counted per core, (device, core, sysfs name) -> count (the status counters, busy time)
        self.driver_counts: dict[tuple[int, int, str], int] = {}
        self.runtimes: list[Runtime] = []
        self.parts: list[SimPart] = [part(name, self) for name, part in parts()]  # after the device trees
        self.part_of: dict[str, SimPart] = {}
        for part in self.parts:
            for kind in part.commands:
                if kind in self.part_of or kind in WORKLOAD_COMMANDS or kind in DEVICE_COMMANDS:
                    other = self.part_of[kind].name if kind in self.part_of else "the simulator"
                    raise ValueError(f"command {kind!r} of the {part.name} part is {other}'s already")
                self.part_of[kind] = part
        self.maps = [mmap.mmap(d.dev_fd, L.NDS_SLOTS * L.NDS_SIZE, mmap.MAP_SHARED) for d in self.devices]
        self.ioctl = [IoctlFile(str(d.ioctl_path)) for d in self.devices]
        self.slot_owner: list[dict[int, Runtime]] = [{} for _ in self.devices]
        self.next_slot = [0 for _ in self.devices]
        self.truth = GroundTruthWriter(root / GROUND_TRUTH_FILE)
        self.control_path = root / CONTROL_FILE
        self.control_path.touch()
        self._control_offset = 0
        self.plans = plan_runtimes(shape, runtimes, options, self.rng)
        self.scheduled: list[tuple[float, dict[str, Any]]] = sorted(
            ((float(f.get("at", 0.0)), dict(f)) for f in options.get("faults") or []), key=lambda x: x[0]
        )
        self.t0 = time.monotonic()
        self._last = self.t0
        self._last_truth = 0.0
        self._last_slow = 0.0
        self._last_memory = self.t0
        self._mem_turn = 0
        for part in self.parts:
            part.begin(self.t0)
        for plan in self.plans:
            self._start(plan)
        self._write_ioctl_all()
        self.truth.write(
            "ready", shape=shape.name, lnc=shape.lnc, devices=shape.devices, phys_cores=shape.phys_cores,
            logical_cores=shape.logical_cores, driver=self.driver, layout=self.layout.label,
            live_counters=self.live_counters, seed=seed, step=self.step_s, root=str(root),
        )  # fmt: skip
        self._write_totals()

    def part(self, name: str) -> SimPart:
        """The simulator part of group ``name`` (KeyError when the group has none)."""
        for p in self.parts:
            if p.name == name:
                return p
        raise KeyError(name)

    # -- what the parts see (part.Host) ----------------------------------------------------------------------
    def owners(self, device: int) -> list[Runtime]:
        return list(self.slot_owner[device].values())

    def wall_clock(self) -> float:
        return time.time()

    def add_driver_count(self, device: int, core: int, name: str, amount: int) -> None:
        key = (device, core, name)
        self.driver_counts[key] = self.driver_counts.get(key, 0) + amount

    def _device_changed(self, device: int) -> None:
        for part in self.parts:
            part.device_changed(device)

    # -- runtimes ------------------------------------------------------------------------------------------
    def _start(self, plan: RuntimePlan) -> Runtime | None:
        devices = [d for d in plan.cores if d not in self.removed_devices]
        if any(len(self.slot_owner[d]) >= L.NDS_SLOTS - 1 for d in devices):
            return None
        proc = spawn_worker(plan.tag, self.burn)
        rt = Runtime(plan=plan, proc=proc, pid=proc.pid, tag=plan.tag if plan.tag is not None else str(proc.pid))
        rt.ready_at = self._last + self.load_time
        link = self.root / "proc" / str(rt.pid)
        if not link.is_symlink():
            link.symlink_to(f"/proc/{rt.pid}")
        n_dev = max(1, len(devices))
        for i, dev in enumerate(devices):
            slot = self._alloc_slot(dev)
            self.slot_owner[dev][slot] = rt
            rt.slots[dev] = slot
            w = SlabWriter(memoryview(self.maps[dev])[slot * L.NDS_SIZE : (slot + 1) * L.NDS_SIZE])
            rt.writers[dev] = w
            w.init_process(runtime_version=2_20_00)
            w.write_process_info(rt.tag)
            rt.host_mem[dev] = {
                ctr: size // n_dev + (size % n_dev if i == 0 else 0) for ctr, size in plan.host_mem.items()
            }
            for ctr, size in rt.host_mem[dev].items():
                w.set_nd(ctr, size)
            for core in plan.cores[dev]:
                for ctr in L.CUMULATIVE_NC_COUNTERS:
                    rt.mirror[(dev, core, ctr)] = rt.base[(dev, core, ctr)] = w.get_nc(core, ctr)
                rt.core_mem[(dev, core)] = dict(plan.core_mem)
                for ctr, size in plan.core_mem.items():
                    w.set_nc(core, ctr, size)
                rt.busy[(dev, core)] = 0.0
                rt.busy_written[(dev, core)] = 0
                rt.macs[(dev, core)] = 0
                rt.exec_acc[(dev, core)] = 0.0
            for j, model in enumerate(plan.models.get(dev, [])[: L.MODEL_SLOTS]):
                w.write_model(j, model)
                self._add(rt, dev, model.nc_index, L.NC_MODEL_LOAD_COUNT, 1)
            self._device_changed(dev)
        self.runtimes.append(rt)
        self.truth.write(
            "start", pid=rt.pid, tag=rt.tag, index=plan.index, cores={str(d): c for d, c in plan.cores.items()},
            slots={str(d): s for d, s in rt.slots.items()}, exec_rate=plan.exec_rate,
            utilization=plan.utilization, latency_us=list(plan.latency_us),
        )  # fmt: skip
        return rt

    def _alloc_slot(self, dev: int) -> int:
        """Round-robin over free slots (a freed slot is not handed out again at once), or the lowest free one."""
        if self.slot_policy == "lowest":
            return min(s for s in range(L.NDS_SLOTS) if s not in self.slot_owner[dev])
        for k in range(L.NDS_SLOTS):
            slot = (self.next_slot[dev] + k) % L.NDS_SLOTS
            if slot not in self.slot_owner[dev]:
                self.next_slot[dev] = (slot + 1) % L.NDS_SLOTS
                return slot
        raise RuntimeError("no free NDS slot")

    def _stop(self, rt: Runtime, reason: str) -> None:
        if rt.state == "stopped":
            return
        rt.state = "stopped"
        totals = self._runtime_totals(rt)
        for dev, slot in rt.slots.items():
            self.slot_owner[dev].pop(slot, None)
            if dev in self.removed_devices:
                continue
            if not self.live_counters:  # old drivers fold the process's counts into sysfs at exit
                for core in rt.plan.cores[dev]:
                    for ctr, name in SYSFS_CORE_NAMES.items():
                        self.add_driver_count(dev, core, name, self._own(rt, dev, core, ctr))
            rt.writers[dev].release(keep_nc_counters=self.live_counters)
            self._device_changed(dev)
        for w in rt.writers.values():
            w.view.release()
        rt.writers.clear()
        stop_worker(rt.proc)
        link = self.root / "proc" / str(rt.pid)
        if link.is_symlink():
            link.unlink()
        self._write_ioctl_all()
        self.truth.write("stop", pid=rt.pid, tag=rt.tag, reason=reason, totals=totals)

    def _own(self, rt: Runtime, dev: int, core: int, ctr: int) -> int:
        key = (dev, core, ctr)
        return rt.mirror.get(key, 0) - rt.base.get(key, 0)

    def _add(self, rt: Runtime, dev: int, core: int, ctr: int, k: int) -> None:
        key = (dev, core, ctr)
        value = rt.mirror.get(key, 0) + k
        rt.mirror[key] = value
        w = rt.writers.get(dev)
        if w is not None:
            w.set_nc(core, ctr, value)
        if self.live_counters and ctr in SYSFS_CORE_NAMES:
            skey = (dev, core, SYSFS_CORE_NAMES[ctr])
            self.driver_counts[skey] = self.driver_counts.get(skey, 0) + k

    def _count(self, rt: Runtime, dev: int, core: int, name: str, k: int) -> None:
        if k <= 0:
            return
        rt.counts[name] += k
        self._add(rt, dev, core, COUNTER_INDEX[name], k)

    # -- one step ------------------------------------------------------------------------------------------
    def step(self, now: float) -> None:
        dt = max(0.0, now - self._last)
        self._last = now
        self._apply_control(now)
        while self.scheduled and self.scheduled[0][0] <= now - self.t0:
            self.apply(self.scheduled.pop(0)[1])
        for rt in self.runtimes:
            if self.vary:
                pattern = self._activity.setdefault(rt.plan.index, Activity(self.seed, rt.plan.index))
                rt.activity = pattern.level(now - self.t0)
            if rt.state == "running" and now >= rt.ready_at:
                self._advance(rt, min(dt, now - rt.ready_at))
        for part in self.parts:
            part.step(now, dt)
        if self.memory_interval > 0 and now - self._last_memory >= self.memory_interval:
            self._last_memory = now
            self._memory_step()
        if now - self._last_slow >= self.sysfs_interval:
            self._last_slow = now
            for part in self.parts:
                part.write(now)
        if now - self._last_truth >= self.truth_interval:
            self._write_totals()

    def _advance(self, rt: Runtime, dt: float) -> None:
        plan = rt.plan
        dt_us = dt * 1e6
        executed: list[tuple[int, int, int]] = []
        for dev, core in rt.core_keys():
            if dev not in rt.writers:
                continue
            key = (dev, core)
            rt.busy[key] += plan.utilization * rt.activity * dt_us
            b = int(rt.busy[key])
            inc = b - rt.busy_written[key]
            if inc:
                rt.busy_written[key] = b
                self._add(rt, dev, core, L.NC_TIME_IN_USE, inc)
                rt.macs[key] += inc * plan.macs_per_us
                self._add(rt, dev, core, L.NC_MAC_COUNT, inc * plan.macs_per_us)
            rt.exec_acc[key] += plan.exec_rate * rt.activity * dt
            n = int(rt.exec_acc[key])
            if n:
                rt.exec_acc[key] -= n
                executed.append((dev, core, n))
        if not executed:
            return
        total = sum(n for _, _, n in executed)
        taken: dict[tuple[int, int], int] = {}
        for kind, rate in plan.error_rates.items():
            acc = rt.err_acc.get(kind, 0.0) + total * rate
            k = int(acc)
            rt.err_acc[kind] = acc - k
            if not k:
                continue
            dev, core, n = executed[self.rng.randrange(len(executed))]
            if kind == "generic":
                self._count(rt, dev, core, "generic", k)
                continue
            if kind == "failed_to_queue":
                self._count(rt, dev, core, "failed_to_queue", k)
                continue
            k = min(k, n - taken.get((dev, core), 0))
            taken[(dev, core)] = taken.get((dev, core), 0) + k
            if kind == "numerical":
                self._count(rt, dev, core, "completed_with_num_err", k)
                self._count(rt, dev, core, "numerical", k)
            elif kind == "timeout":
                self._count(rt, dev, core, "timed_out", k)
            elif kind == "hardware":
                self._count(rt, dev, core, "completed_with_err", k)
                self._count(rt, dev, core, "hardware", k)
        lo, hi = plan.latency_us
        for dev, core, n in executed:
            self._count(rt, dev, core, "completed", n - taken.get((dev, core), 0))
            self._add(rt, dev, core, L.NC_INFERENCE_COUNT, n)
            w = rt.writers[dev]
            lat = self.rng.randint(lo, hi)
            w.set_nc(core, L.NC_LATENCY_DEVICE, lat)
            w.set_nc(core, L.NC_LATENCY_TOTAL, int(lat * self.rng.uniform(1.05, 1.15)))

    def busy_share(self, now: float) -> dict[int, float]:
        """Neuron device -> the busy share of its physical cores now (what drives its collective traffic)."""
        busy: dict[int, float] = {}
        cores = max(1, self.shape.phys_cores)
        for rt in self.runtimes:
            if rt.state == "running" and now >= rt.ready_at:
                for dev, owned in rt.plan.cores.items():
                    busy[dev] = busy.get(dev, 0.0) + rt.plan.utilization * rt.activity * len(owned) / cores
        return busy

    def _memory_step(self) -> None:
        """One runtime's device and host tensor memory drifts (a runtime attached, hung or running; a paused one
        holds still with its counts, so that a capture or a test compares exact levels)."""
        live = [rt for rt in self.runtimes if rt.state not in ("stopped", "paused") and rt.writers]
        if not live:
            return
        rt = live[self._mem_turn % len(live)]
        self._mem_turn += 1
        dev, core = rt.core_keys()[self.rng.randrange(len(rt.core_keys()))]
        if dev not in rt.writers:
            return
        mem = rt.core_mem[(dev, core)]
        mem[L.NC_MEM_TENSORS_DEVICE] = max(0, mem[L.NC_MEM_TENSORS_DEVICE] + self.rng.randint(-64, 64) * 1024**2)
        rt.writers[dev].set_nc(core, L.NC_MEM_TENSORS_DEVICE, mem[L.NC_MEM_TENSORS_DEVICE])
        host = rt.host_mem[dev]
        host[L.ND_MEM_TENSORS_HOST] = max(0, host[L.ND_MEM_TENSORS_HOST] + self.rng.randint(-8, 8) * 1024**2)
        rt.writers[dev].set_nd(L.ND_MEM_TENSORS_HOST, host[L.ND_MEM_TENSORS_HOST])
        self._device_changed(dev)
        self._write_ioctl(dev)

    # -- control -------------------------------------------------------------------------------------------
    def _apply_control(self, now: float) -> None:
        try:
            with open(self.control_path, "rb") as f:
                f.seek(self._control_offset)
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1
        self._control_offset += end
        for line in data[:end].splitlines():
            if not line.strip():
                continue
            try:
                cmd = json.loads(line)
            except ValueError:
                continue
            if "at" in cmd and float(cmd["at"]) > now - self.t0:
                self.scheduled.append((float(cmd["at"]), cmd))
                self.scheduled.sort(key=lambda x: x[0])
                continue
            self.apply(cmd)

    def _find(self, cmd: dict[str, Any]) -> Runtime | None:
        for rt in reversed(self.runtimes):
            if rt.state != "stopped" and (rt.tag == cmd.get("tag") or rt.pid == cmd.get("pid")):
                return rt
        return None

    def apply(self, cmd: dict[str, Any]) -> None:
        """Apply one command: the workload's or a device's here, else the part that names its kind answers it."""
        kind = str(cmd.get("kind"))
        count = int(cmd.get("count", 1))
        rt = self._find(cmd)
        detail: dict[str, Any] = {"kind": cmd.get("kind"), "count": count}
        if rt is not None:
            detail.update(pid=rt.pid, tag=rt.tag)
        if kind in WORKLOAD_COMMANDS:
            error = self._apply_workload(kind, cmd, rt, count, detail)
        elif kind in DEVICE_COMMANDS:
            error = self._apply_device(kind, cmd, detail)
        elif kind in self.part_of:
            error = self.part_of[kind].apply(kind, cmd, detail)
        else:
            error = f"unknown command kind {cmd.get('kind')!r}"
        if error:
            return self._reject(cmd, error)
        if kind != "stop_runtime":
            self.truth.write("fault", **detail)
        self._write_totals()
        if "id" in cmd:
            self.truth.write("command", id=cmd["id"], ok=True, **detail)

    def _apply_workload(
        self, kind: str, cmd: dict[str, Any], rt: Runtime | None, count: int, detail: dict[str, Any]
    ) -> str:
        """The runtimes' commands; returns why a command cannot apply ("" when applied)."""
        if kind == "pause" or kind == "resume":
            for r in self.runtimes:
                if r.state in ("running", "paused"):
                    r.state = "paused" if kind == "pause" else "running"
            self._write_ioctl_all()
            return ""
        if kind == "start_runtime":
            new = self._start_like(cmd)
            if new is None:
                return "no cores for the new runtime"
            detail.update(pid=new.pid, tag=new.tag)
            self._write_ioctl_all()
            return ""
        if rt is None:
            return "no such runtime"
        if kind in ERROR_BURSTS:
            first = next(iter(rt.core_keys()), None)
            if first is None:
                return "no such runtime"
            dev, core = first
            for name in ERROR_BURSTS[kind]:
                self._count(rt, dev, core, name, count)
            if kind == "hardware_error":
                self._add(rt, dev, core, L.NC_HW_ERR_HBM_UE, count)
        elif kind == "stop_runtime":
            self._stop(rt, cmd.get("reason", "stopped by command"))
        elif kind in ("hang_runtime", "resume_runtime"):
            rt.state = "hung" if kind == "hang_runtime" else "running"
            self._write_ioctl_all()
            if kind == "hang_runtime":
                self.truth.write("hang", pid=rt.pid, tag=rt.tag)
        else:  # set_rate
            if "exec_rate" in cmd:
                rt.plan.exec_rate = float(cmd["exec_rate"])
            if "utilization" in cmd:
                rt.plan.utilization = float(cmd["utilization"])
        return ""

    def _apply_device(self, kind: str, cmd: dict[str, Any], detail: dict[str, Any]) -> str:
        """A device's own events, which every part hears; returns why a command cannot apply ("" when applied)."""
        dev = int(cmd.get("device", 0))
        if kind == "remove_device":
            self._remove_device(dev)
            detail.update(device=dev)
            return ""
        if not 0 <= dev < len(self.devices) or dev in self.removed_devices:
            return f"no device {dev}"
        detail.update(device=dev)
        if kind == "reset_device":  # the driver's counts start again; a pending repair is done
            for part in self.parts:
                part.device_reset(dev)
            return ""
        # remove_nodes: the named node families of the device vanish (a driver that no longer has them there)
        families = cmd.get("nodes")
        known = node_families()
        if not isinstance(families, list) or not families or any(f not in known for f in families):
            return f"remove_nodes: 'nodes' must list node families among {', '.join(sorted(known))}"
        for family in families:
            for name in known[family]:
                self.part(name).remove_nodes(dev, family)
        detail.update(nodes=list(families))
        return ""

    def _reject(self, cmd: dict[str, Any], why: str) -> None:
        if "id" in cmd:
            self.truth.write("command", id=cmd["id"], ok=False, error=why, kind=cmd.get("kind"))

    def _start_like(self, cmd: dict[str, Any]) -> Runtime | None:
        """Start a runtime on the cores of the runtime tagged ``like`` (by default the last stopped one)."""
        like = cmd.get("like")
        template = None
        for r in reversed(self.runtimes):
            if (like is None and r.state == "stopped") or r.tag == like:
                template = r.plan
                break
        if template is None:
            return None
        plan = RuntimePlan(**{**template.__dict__})
        plan.index = len(self.runtimes)
        plan.tag = cmd.get("new_tag", f"job-{plan.index:02d}")
        if cmd.get("untagged"):
            plan.tag = None
        return self._start(plan)

    def _remove_device(self, dev: int) -> None:
        """The device vanishes (driver unbound): its sysfs directory, /dev node and ioctl file go away."""
        if dev in self.removed_devices or dev >= len(self.devices):
            return
        self.removed_devices.add(dev)
        d = self.devices[dev]
        shutil.rmtree(d.dir, ignore_errors=True)
        for p in (self.root / "sys/class/neuron_device" / f"neuron{dev}", d.dev_path, d.ioctl_path):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        for rt in self.runtimes:
            w = rt.writers.pop(dev, None)
            if w is not None:
                w.view.release()
        for part in self.parts:
            part.device_removed(dev)

    # -- files ---------------------------------------------------------------------------------------------
    def _entries(self, dev: int) -> list[AppEntry]:
        entries = []
        for slot, rt in sorted(self.slot_owner[dev].items()):
            cores = rt.plan.cores.get(dev, [])
            lock = 0
            uuids: list[bytes] = []
            if rt.state == "running":
                models = rt.plan.models.get(dev, [])
                for c in cores:
                    if c < L.APP_INFO_MAX_LOCKED:
                        lock |= 1 << c
                for c in range(L.APP_INFO_MAX_LOCKED):
                    on_core = [m.uuid for m in models if m.nc_index == c]
                    uuids.append(on_core[0] if on_core and lock & (1 << c) else b"")
            entries.append(
                AppEntry(
                    pid=rt.pid,
                    nc_lock_map=lock,
                    uuids=tuple(uuids),
                    host_mem=sum(rt.host_mem.get(dev, {}).values()),
                    device_mem=sum(sum(rt.core_mem[(dev, c)].values()) for c in cores if (dev, c) in rt.core_mem),
                    slot=slot,
                )
            )
        if dev == 0:  # an opener without a datastore (a tool such as neuron-ls): listed, but no NDS
            entries.append(AppEntry(pid=os.getpid()))
        return entries

    def _write_ioctl(self, dev: int) -> None:
        if dev not in self.removed_devices:
            self.ioctl[dev].write(self._entries(dev))

    def _write_ioctl_all(self) -> None:
        for dev in range(len(self.devices)):
            self._write_ioctl(dev)

    # -- ground truth --------------------------------------------------------------------------------------
    def _runtime_totals(self, rt: Runtime) -> dict[str, Any]:
        host: dict[str, int] = dict.fromkeys(HOST_NAMES.values(), 0)
        for mem in rt.host_mem.values():
            for ctr, size in mem.items():
                if ctr in HOST_NAMES:
                    host[HOST_NAMES[ctr]] += size
        return {
            "tag": rt.tag,
            "running": rt.state == "running",
            "state": rt.state,
            "counters": dict(rt.counts),
            "busy_us": {f"{d}:{c}": v for (d, c), v in rt.busy_written.items()},
            "macs": {f"{d}:{c}": v for (d, c), v in rt.macs.items()},
            "host_mem": host,
            "core_mem": {
                f"{d}:{c}": {CORE_NAMES[ctr]: size for ctr, size in mem.items()} for (d, c), mem in rt.core_mem.items()
            },
        }

    def _write_totals(self) -> None:
        self._last_truth = time.monotonic()
        totals: dict[str, Any] = {
            "runtimes": {str(rt.pid): self._runtime_totals(rt) for rt in self.runtimes if rt.state != "stopped"},
            "sysfs": {f"{d}:{c}:{n}": v for (d, c, n), v in self.driver_counts.items()},
        }
        for part in self.parts:
            totals.update(part.totals())
        self.truth.write("totals", **totals)

    # -- lifetime ------------------------------------------------------------------------------------------
    def run(self, should_stop: Any, duration: float | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        """Step every ``step_s`` until ``should_stop()`` or ``duration``; between steps it sleeps at most
        WAKE_SECONDS at a time, so a stop request is seen that soon whatever the step (a signal handler that
        sets a flag does not end a ``time.sleep``; ``sleep``: one that a signal ends at once, see sim/cli.py)."""
        next_t = time.monotonic()
        end = None if duration is None else next_t + duration
        while not should_stop():
            now = time.monotonic()
            if end is not None and now >= end:
                break
            self.step(now)
            next_t += self.step_s
            delay = next_t - time.monotonic()
            if delay < -self.step_s:
                next_t = time.monotonic()
            while delay > 0 and not should_stop():
                sleep(min(delay, WAKE_SECONDS))
                delay = next_t - time.monotonic()

    def shutdown(self) -> None:
        self._write_totals()
        for rt in self.runtimes:
            if rt.state != "stopped":
                self._stop(rt, "simulator shutdown")
        self.truth.write("stopped")
        self.truth.close()
        for f in self.ioctl:
            f.close()
        for part in self.parts:
            part.close()
        for m in self.maps:
            with contextlib.suppress(BufferError):
                m.close()
        for d in self.devices:
            d.close()
