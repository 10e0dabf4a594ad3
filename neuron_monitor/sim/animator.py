"""The simulator's animation: runtimes start and stop, execute, fail, move memory; ECC events arrive.

`Simulator(root, shape, runtimes, seed, options)` builds the tree (tree.py), starts the initial runtimes (real
worker processes) and then, every ``step`` seconds, advances every runtime's counters in its NDS slab, rewrites
the ioctl files when the application lists change, moves /proc/stat, and appends ground truth. Control commands
(appended by tests to ``run/neuron-sim/control.jsonl``) and scheduled faults are applied at step boundaries.
The options are documented on `TemporarySimulator` (temporary.py).
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import random
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.pci import sim_answer_rel
from neuron_monitor.sim.datastore import AppEntry, IoctlFile, SlabWriter
from neuron_monitor.sim.efa import FAULT_KINDS as EFA_FAULT_KINDS
from neuron_monitor.sim.efa import EfaTree
from neuron_monitor.sim.ground_truth import GROUND_TRUTH_FILE, GroundTruthWriter
from neuron_monitor.sim.shapes import Shape
from neuron_monitor.sim.tree import DeviceTree, InPlaceFile, TreeBuilder, driver_tuple, write_host_files
from neuron_monitor.sim.workers import spawn_worker, stop_worker
from neuron_monitor.sim.workload import Activity, RuntimePlan, plan_runtimes

CONTROL_FILE = "run/neuron-sim/control.jsonl"
COUNTER_INDEX: dict[str, int] = dict(L.EXECUTION_SUMMARY + L.ERROR_SUMMARY)
HOST_NAMES = {ctr: name for name, ctr in L.HOST_MEM_COUNTERS}
CORE_NAMES = {ctr: name for name, ctr in L.DEVICE_MEM_COUNTERS}
FAULT_KINDS = (
    "numerical_burst", "hardware_error", "timeouts", "failed_to_queue_burst", "generic_errors",
    "ecc_uncorrected", "ecc_corrected", "stop_runtime", "hang_runtime", "resume_runtime", "pause", "resume",
    "start_runtime", "set_rate", "remove_device", "unhealthy", "healthy", "ecc_repairable", "power_no_data",
    "power_valid", "busy_without_runtime", "hw_error_event", "reset_device", *EFA_FAULT_KINDS,
)  # fmt: skip
# the per-core sysfs files fed by the datastore counters (status counters and busy time)
SYSFS_CORE_NAMES: dict[int, str] = {
    L.NC_TIME_IN_USE: "nc_time_in_use", L.NC_INFER_COMPLETED: "success",
    L.NC_COMPLETED_WITH_ERR: "execute_completed_with_error",
    L.NC_COMPLETED_WITH_NUM_ERR: "execute_completed_with_num_error",
    L.NC_TIMED_OUT: "timeout", L.NC_INCORRECT_INPUT: "exec_bad_input", L.NC_FAILED_TO_QUEUE: "execute_failed_to_queue",
    L.NC_ERR_GENERIC: "generic_error", L.NC_ERR_HW: "hw_error",
}  # fmt: skip
DEVICE_CATEGORY_OF = {ctr: name for name, ctr in L.DEVICE_MEM_COUNTERS}
HOST_CATEGORY_OF = {ctr: name for name, ctr in L.HOST_MEM_COUNTERS}


WAKE_SECONDS = 0.1  # the longest sleep between checks for a stop request


def default_driver(shape: Shape) -> str:
    return "2.24.7.0" if shape.nd_arch == "NDv1" else "2.30.2.0"


@dataclass
class Runtime:
    plan: RuntimePlan
    proc: subprocess.Popen[bytes]
    pid: int
    tag: str
    state: str = "running"  # running | hung | paused | stopped
    ready_at: float = 0.0  # models load until then: no executions, no busy time
    slots: dict[int, int] = field(default_factory=dict)
    writers: dict[int, SlabWriter] = field(default_factory=dict)
    mirror: dict[tuple[int, int, int], int] = field(default_factory=dict)  # absolute slab values
    base: dict[tuple[int, int, int], int] = field(default_factory=dict)  # slab values at attach
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTER_INDEX, 0))
    busy: dict[tuple[int, int], float] = field(default_factory=dict)
    busy_written: dict[tuple[int, int], int] = field(default_factory=dict)
    macs: dict[tuple[int, int], int] = field(default_factory=dict)
    exec_acc: dict[tuple[int, int], float] = field(default_factory=dict)
    err_acc: dict[str, float] = field(default_factory=dict)
    activity: float = 1.0  # share of the planned load now (option "vary"; always 1.0 without it)
    host_mem: dict[int, dict[int, int]] = field(default_factory=dict)  # device -> ND counter -> bytes
    core_mem: dict[tuple[int, int], dict[int, int]] = field(default_factory=dict)

    def core_keys(self) -> list[tuple[int, int]]:
        return [(d, c) for d, cores in self.plan.cores.items() for c in cores]


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
        self.ecc_rate = float(options.get("ecc_rate", 0.02))  # corrected ECC events per device per second
        self.burn = int(options.get("worker_cpu", 1000))
        self.load_time = float(options.get("load_time", 0.5))
        self.slot_policy = str(options.get("slot_policy", "round_robin"))
        self.vary = bool(options.get("vary", False))  # phases, bursts and idle gaps (workload.Activity)
        self._activity: dict[int, Activity] = {}
        self.driver = str(options.get("driver") or default_driver(shape))
        self.live_counters = driver_tuple(self.driver) >= (2, 30)
        family_default_lnc = 2 if shape.nc_arch in ("NCv3", "NCv4") else 1
        self.builder = builder = TreeBuilder()  # each directory made once; its remove() undoes the tree
        write_host_files(root, shape, self.driver, family_default_lnc, builder)
        self.devices = [DeviceTree(root, shape, i, self.driver, builder) for i in range(shape.devices)]
        self.efa = EfaTree(root, shape, options, builder)
        self.maps = [mmap.mmap(d.dev_fd, L.NDS_SLOTS * L.NDS_SIZE, mmap.MAP_SHARED) for d in self.devices]
        self.ioctl = [IoctlFile(str(d.ioctl_path)) for d in self.devices]
        self.slot_owner: list[dict[int, Runtime]] = [{} for _ in self.devices]
        self.next_slot = [0 for _ in self.devices]
        self.removed_devices: set[int] = set()
        self.ecc: list[dict[str, int]] = [dict.fromkeys(d.ecc, 0) for d in self.devices]
        self.sysfs_core: dict[tuple[int, int, str], int] = {}
        self.unhealthy: dict[int, list[str]] = {}  # device -> components the driver reports unhealthy
        self.power_no_data: set[int] = set()
        self.hw_error_events: dict[int, int] = {}  # device -> health_status/hw_error_event
        self.power_lines: dict[int, str] = {}
        self._power_minute = -1
        self.orphan_busy: dict[
            tuple[int, int], float
        ] = {}  # (device, core) -> utilization of a process without data block
        self._orphan_acc: dict[tuple[int, int], float] = {}
        self.mem_peak: dict[tuple[int, int, str], int] = {}  # (device, core or -1 for host, category) -> peak bytes
        self.truth = GroundTruthWriter(root / GROUND_TRUTH_FILE)
        self.control_path = root / CONTROL_FILE
        self.control_path.touch()
        self._control_offset = 0
        self.runtimes: list[Runtime] = []
        self.plans = plan_runtimes(shape, runtimes, options, self.rng)
        self.scheduled: list[tuple[float, dict[str, Any]]] = sorted(
            ((float(f.get("at", 0.0)), dict(f)) for f in options.get("faults") or []), key=lambda x: x[0]
        )
        self._proc_stat = InPlaceFile(root / "proc/stat")
        self._meminfo = InPlaceFile(root / "proc/meminfo")
        self._uptime = InPlaceFile(root / "proc/uptime")
        self._cpu_load = [self.rng.uniform(0.02, 0.4) for _ in range(shape.vcpus)]
        self._jiffies = [[0.0] * 8 for _ in range(shape.vcpus)]
        self._ctxt = 0.0
        self._boot = time.monotonic() - 1000.0
        self.t0 = time.monotonic()
        self._last = self.t0
        self._last_truth = 0.0
        self._last_slow = 0.0
        self._last_proc = self.t0
        self._last_memory = self.t0
        self._mem_turn = 0
        self._write_proc(self.t0, 0.0)
        for plan in self.plans:
            self._start(plan)
        self._write_ioctl_all()
        self.truth.write(
            "ready", shape=shape.name, lnc=shape.lnc, devices=shape.devices, phys_cores=shape.phys_cores,
            logical_cores=shape.logical_cores, driver=self.driver, live_counters=self.live_counters, seed=seed,
            step=self.step_s, root=str(root),
        )  # fmt: skip
        self._write_totals()

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
            self._sysfs_mem(dev)
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
                        key = (dev, core, name)
                        self.sysfs_core[key] = self.sysfs_core.get(key, 0) + self._own(rt, dev, core, ctr)
            rt.writers[dev].release(keep_nc_counters=self.live_counters)
            self._sysfs_mem(dev)
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
            name = SYSFS_CORE_NAMES[ctr]
            skey = (dev, core, name)
            self.sysfs_core[skey] = self.sysfs_core.get(skey, 0) + k

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
        self._ecc_step(dt)
        if self.efa.adapters:
            self.efa.step(dt, self._busy_share(now))
        if self.orphan_busy and self.live_counters:
            self._orphan_step(dt)
        if self.memory_interval > 0 and now - self._last_memory >= self.memory_interval:
            self._last_memory = now
            self._memory_step()
        if now - self._last_proc >= 0.1:
            self._write_proc(now, now - self._last_proc)
            self._last_proc = now
        if now - self._last_slow >= self.sysfs_interval:
            self._last_slow = now
            self._write_slow(now)
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

    def _busy_share(self, now: float) -> dict[int, float]:
        """Neuron device -> the busy share of its physical cores now (what drives its collective traffic)."""
        busy: dict[int, float] = {}
        cores = max(1, self.shape.phys_cores)
        for rt in self.runtimes:
            if rt.state == "running" and now >= rt.ready_at:
                for dev, owned in rt.plan.cores.items():
                    busy[dev] = busy.get(dev, 0.0) + rt.plan.utilization * rt.activity * len(owned) / cores
        return busy

    def _orphan_step(self, dt: float) -> None:
        """Busy time of processes with no readable data block: the driver counts it, no runtime reports it."""
        for (dev, core), utilization in self.orphan_busy.items():
            acc = self._orphan_acc.get((dev, core), 0.0) + utilization * dt * 1e6
            k = int(acc)
            self._orphan_acc[(dev, core)] = acc - k
            key = (dev, core, "nc_time_in_use")
            self.sysfs_core[key] = self.sysfs_core.get(key, 0) + k

    def _ecc_step(self, dt: float) -> None:
        if self.ecc_rate <= 0:
            return
        for dev, counts in enumerate(self.ecc):
            eligible = "mem_ecc_corrected" in counts and dev not in self.removed_devices
            if eligible and self.rng.random() < self.ecc_rate * dt:
                self._ecc_add(dev, self.rng.choice(("mem_ecc_corrected", "sram_ecc_corrected")), 1)

    def _ecc_add(self, dev: int, name: str, k: int) -> None:
        if name not in self.ecc[dev] or dev in self.removed_devices:
            return
        self.ecc[dev][name] += k
        # the firmware keeps 16-bit counts; the driver prints the register field
        self.devices[dev].ecc[name].write(b"%d\n" % (self.ecc[dev][name] & 0xFFFF))

    def _memory_step(self) -> None:
        live = [rt for rt in self.runtimes if rt.state != "stopped" and rt.writers]
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
        self._sysfs_mem(dev)
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
        kind = cmd.get("kind")
        count = int(cmd.get("count", 1))
        rt = self._find(cmd)
        detail: dict[str, Any] = {"kind": kind, "count": count}
        if rt is not None:
            detail.update(pid=rt.pid, tag=rt.tag)
        first = next(iter(rt.core_keys()), None) if rt is not None else None
        if kind in ("numerical_burst", "hardware_error", "timeouts", "failed_to_queue_burst", "generic_errors"):
            if rt is None or first is None:
                return self._reject(cmd, "no such runtime")
            dev, core = first
            names = {
                "numerical_burst": ("completed_with_num_err", "numerical"),
                "hardware_error": ("completed_with_err", "hardware"),
                "timeouts": ("timed_out",),
                "failed_to_queue_burst": ("failed_to_queue",),
                "generic_errors": ("generic",),
            }[kind]
            for name in names:
                self._count(rt, dev, core, name, count)
            if kind == "hardware_error":
                self._add(rt, dev, core, L.NC_HW_ERR_HBM_UE, count)
        elif kind in ("ecc_uncorrected", "ecc_corrected"):
            dev = int(cmd.get("device", 0))
            where = cmd.get("memory", "mem")
            name = f"{where}_ecc_{'uncorrected' if kind == 'ecc_uncorrected' else 'corrected'}"
            if dev >= len(self.ecc) or name not in self.ecc[dev]:
                return self._reject(cmd, f"device {dev} has no {name}")
            self._ecc_add(dev, name, count)
            detail.update(device=dev, counter=name)
        elif kind == "stop_runtime":
            if rt is None:
                return self._reject(cmd, "no such runtime")
            self._stop(rt, cmd.get("reason", "stopped by command"))
        elif kind in ("hang_runtime", "resume_runtime"):
            if rt is None:
                return self._reject(cmd, "no such runtime")
            rt.state = "hung" if kind == "hang_runtime" else "running"
            self._write_ioctl_all()
            if kind == "hang_runtime":
                self.truth.write("hang", pid=rt.pid, tag=rt.tag)
        elif kind in ("pause", "resume"):
            for r in self.runtimes:
                if r.state in ("running", "paused"):
                    r.state = "paused" if kind == "pause" else "running"
            self._write_ioctl_all()
        elif kind == "set_rate":
            if rt is None:
                return self._reject(cmd, "no such runtime")
            if "exec_rate" in cmd:
                rt.plan.exec_rate = float(cmd["exec_rate"])
            if "utilization" in cmd:
                rt.plan.utilization = float(cmd["utilization"])
        elif kind == "start_runtime":
            new = self._start_like(cmd)
            if new is None:
                return self._reject(cmd, "no cores for the new runtime")
            detail.update(pid=new.pid, tag=new.tag)
            self._write_ioctl_all()
        elif kind in ("unhealthy", "healthy", "ecc_repairable", "power_no_data", "power_valid", "busy_without_runtime",
                      "hw_error_event", "reset_device"):  # fmt: skip
            error = self._apply_device_fault(kind, cmd, count, detail)
            if error:
                return self._reject(cmd, error)
        elif kind in EFA_FAULT_KINDS:
            error = self.efa.apply(kind, cmd)
            if error:
                return self._reject(cmd, error)
            detail.update(adapter=int(cmd.get("adapter", 0)))
        elif kind == "remove_device":
            dev = int(cmd.get("device", 0))
            self._remove_device(dev)
            detail.update(device=dev)
        else:
            return self._reject(cmd, f"unknown command kind {kind!r}")
        if kind not in ("stop_runtime",):
            self.truth.write("fault", **detail)
        self._write_totals()
        if "id" in cmd:
            self.truth.write("command", id=cmd["id"], ok=True, **detail)

    def _apply_device_fault(self, kind: str, cmd: dict[str, Any], count: int, detail: dict[str, Any]) -> str:
        """The device-telemetry faults; returns why a command cannot apply ("" when applied)."""
        dev = int(cmd.get("device", 0))
        if not 0 <= dev < len(self.devices) or dev in self.removed_devices:
            return f"no device {dev}"
        detail.update(device=dev)
        d = self.devices[dev]
        if kind in ("unhealthy", "healthy"):
            if d.health is None:
                return f"driver {self.driver} exposes no health status"
            comps = self.unhealthy.setdefault(dev, [])
            component = str(cmd.get("component", "hbm"))
            if kind == "unhealthy" and component not in comps:
                comps.append(component)
            elif kind == "healthy":
                comps[:] = [c for c in comps if c != component] if "component" in cmd else []
            detail.update(component=component, unhealthy=list(comps))
            d.health.write((",".join(comps) + "\n").encode())
        elif kind == "ecc_repairable":
            if "mem_ecc_repairable_uncorrected" not in self.ecc[dev]:
                return f"device {dev} has no mem_ecc_repairable_uncorrected"
            self._ecc_add(dev, "mem_ecc_repairable_uncorrected", count)
            detail.update(counter="mem_ecc_repairable_uncorrected")
        elif kind in ("hw_error_event", "reset_device"):
            if d.health is None and kind == "hw_error_event":
                return f"driver {self.driver} exposes no health status"
            if kind == "reset_device":  # the driver's counts start again; a pending repair is done
                for name in self.ecc[dev]:
                    self.ecc[dev][name] = 0
                    d.ecc[name].write(b"0\n")
                self.hw_error_events[dev] = 0
                self.unhealthy.pop(dev, None)
                if d.health is not None:
                    d.health.write(b"\n")
            else:
                self.hw_error_events[dev] = self.hw_error_events.get(dev, 0) + count
            if d.health is not None:
                hw = d.dir / "stats/hardware/health_status/hw_error_event"
                hw.write_bytes(b"%d\n" % self.hw_error_events.get(dev, 0))
        elif kind in ("power_no_data", "power_valid"):
            if d.power is None:
                return f"driver {self.driver} exposes no power utilization"
            (self.power_no_data.add if kind == "power_no_data" else self.power_no_data.discard)(dev)
            self._write_power(force=True)
        else:  # busy_without_runtime
            core = int(cmd.get("core", 0))
            if not 0 <= core < self.shape.phys_cores:
                return f"no core {core}"
            utilization = float(cmd.get("utilization", 0.5))
            if utilization > 0:
                self.orphan_busy[(dev, core)] = min(1.0, utilization)
            else:
                self.orphan_busy.pop((dev, core), None)
            detail.update(core=core, utilization=utilization)
        return ""

    def _write_power(self, force: bool = False) -> None:
        """The driver's once-a-minute power roll-up: rewritten when the wall-clock minute changes."""
        minute = int(time.time() // 60)
        if minute == self._power_minute and not force:
            return
        self._power_minute = minute
        for dev, d in enumerate(self.devices):
            if d.power is None or dev in self.removed_devices:
                continue
            if dev in self.power_no_data:
                line = f"POWER_STATUS_NO_DATA,{minute * 60},0.00,0.00,0.00"
            else:
                util = sum(rt.plan.utilization * rt.activity * len(rt.plan.cores.get(dev, ())) for rt in self.runtimes
                           if rt.state == "running") / max(1, self.shape.phys_cores)  # fmt: skip
                avg = min(95.0, 10.0 + 70.0 * util)
                line = f"POWER_STATUS_VALID,{minute * 60},{max(0.0, avg - 5):.2f},{min(100.0, avg + 5):.2f},{avg:.2f}"
            self.power_lines[dev] = line
            d.power.write(line.encode() + b"\n")

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
        bdf = self.root / sim_answer_rel(dev)
        for p in (self.root / "sys/class/neuron_device" / f"neuron{dev}", d.dev_path, d.ioctl_path, bdf):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        for rt in self.runtimes:
            w = rt.writers.pop(dev, None)
            if w is not None:
                w.view.release()

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

    def _sysfs_mem(self, dev: int) -> None:
        if dev in self.removed_devices:
            return
        d = self.devices[dev]
        owners = list(self.slot_owner[dev].values())
        for core, files in enumerate(d.core_files):
            total = 0
            by_cat: dict[str, int] = {}
            for rt in owners:
                for ctr, size in rt.core_mem.get((dev, core), {}).items():
                    total += size
                    cat = DEVICE_CATEGORY_OF.get(ctr, "uncategorized")
                    by_cat[cat] = by_cat.get(cat, 0) + size
            files["memory_usage/device_mem"].write(b"%d\n" % total)
            self._write_mem(d.core_mem[core], dev, core, by_cat)
        host: dict[str, int] = {}
        for rt in owners:
            for ctr, size in rt.host_mem.get(dev, {}).items():
                cat = HOST_CATEGORY_OF.get(ctr, "uncategorized")
                host[cat] = host.get(cat, 0) + size
        self._write_mem(d.host_mem, dev, -1, host)

    def _write_mem(self, files: dict[str, Any], dev: int, core: int, by_cat: dict[str, int]) -> None:
        for cat, (total_f, peak_f) in files.items():
            used = by_cat.get(cat, 0)
            peak = max(used, self.mem_peak.get((dev, core, cat), 0))
            self.mem_peak[(dev, core, cat)] = peak
            total_f.write(b"%d\n" % used)
            peak_f.write(b"%d\n" % peak)

    def _write_slow(self, now: float) -> None:
        for dev, d in enumerate(self.devices):
            if dev in self.removed_devices:
                continue
            for core, files in enumerate(d.core_files):
                busy = self.sysfs_core.get((dev, core, "nc_time_in_use"), 0)
                files["other_info/nc_time_in_use"].write(b"%d\n" % busy)
                for name in d.status_names:
                    files[f"status/{name}"].write(b"%d\n" % self.sysfs_core.get((dev, core, name), 0))
        self._write_power()
        self.efa.write()
        used = 4 * 1024**3 + sum(sum(sum(h.values()) for h in rt.host_mem.values()) for rt in self.runtimes
                                 if rt.state != "stopped")  # fmt: skip
        total_kb = self.shape.host_memory // 1024
        free_kb = max(0, total_kb - used // 1024)
        self._meminfo.write(
            (
                f"MemTotal:       {total_kb} kB\nMemFree:        {free_kb} kB\nMemAvailable:   {free_kb} kB\n"
                f"Buffers:        0 kB\nCached:         0 kB\nSwapCached:     0 kB\n"
                f"SwapTotal:      0 kB\nSwapFree:       0 kB\n"
            ).encode()
        )
        up = now - self._boot
        self._uptime.write(b"%.2f %.2f\n" % (up, up * self.shape.vcpus * 0.8))

    def _write_proc(self, now: float, dt: float) -> None:
        ticks = 100.0 * dt  # USER_HZ
        running = sum(1 for rt in self.runtimes if rt.state == "running")
        lines = []
        total = [0] * 8
        for cpu, j in enumerate(self._jiffies):
            load = min(0.98, self._cpu_load[cpu] + (0.3 if cpu < running else 0.0))
            j[0] += ticks * load * 0.8
            j[2] += ticks * load * 0.2
            j[3] += ticks * (1.0 - load)
            vals = [int(x) for x in j]
            for i, v in enumerate(vals):
                total[i] += v
            lines.append(f"cpu{cpu} " + " ".join(map(str, vals)) + " 0 0")
        self._ctxt += dt * 2000 * self.shape.vcpus
        head = "cpu  " + " ".join(map(str, total)) + " 0 0"
        body = "\n".join([head, *lines, "intr 0", f"ctxt {int(self._ctxt)}", f"btime {int(time.time() - 1000)}"])
        self._proc_stat.write((body + "\nprocesses 1\nprocs_running 1\nprocs_blocked 0\n").encode())

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
        self.truth.write(
            "totals",
            runtimes={str(rt.pid): self._runtime_totals(rt) for rt in self.runtimes if rt.state != "stopped"},
            ecc={str(d): dict(c) for d, c in enumerate(self.ecc)},
            sysfs={f"{d}:{c}:{n}": v for (d, c, n), v in self.sysfs_core.items()},
            unhealthy={str(d): list(c) for d, c in self.unhealthy.items()},
            power={str(d): line for d, line in self.power_lines.items()},
            efa=self.efa.totals(),
        )

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
        for m in self.maps:
            with contextlib.suppress(BufferError):
                m.close()
        for d in self.devices:
            d.close()
