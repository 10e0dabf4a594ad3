"""The simulator's part for ``vcpu_usage`` (contract: sim/part.py): ``proc/stat``, rewritten every 0.1 s.

Each vCPU has a background load drawn from the seed (2-40 %); the first vCPUs, one per running runtime, carry 30 %
more. Ticks advance at USER_HZ (100/s), split 80/20 between user and system time; ``ctxt`` grows 2,000 per vCPU
per second.
"""

from __future__ import annotations

from pathlib import Path

from neuron_monitor.sim.part import Host, SimPart
from neuron_monitor.sim.tree import InPlaceFile

INTERVAL = 0.1  # seconds between rewrites


class VcpuPart(SimPart):
    def __init__(self, name: str, host: Host) -> None:
        super().__init__(name, host)
        self._file = InPlaceFile(Path(host.root) / "proc/stat")
        self._cpu_load: list[float] = []
        self._jiffies = [[0.0] * 8 for _ in range(host.shape.vcpus)]
        self._ctxt = 0.0
        self._last = 0.0

    def begin(self, now: float) -> None:
        self._cpu_load = [self.host.rng.uniform(0.02, 0.4) for _ in range(self.host.shape.vcpus)]
        self._last = now
        self._write(0.0)

    def step(self, now: float, dt: float) -> None:
        if now - self._last >= INTERVAL:
            self._write(now - self._last)
            self._last = now

    def _write(self, dt: float) -> None:
        ticks = 100.0 * dt  # USER_HZ
        running = sum(1 for rt in self.host.runtimes if rt.state == "running")
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
        self._ctxt += dt * 2000 * self.host.shape.vcpus
        head = "cpu  " + " ".join(map(str, total)) + " 0 0"
        btime = int(self.host.wall_clock() - 1000)
        body = "\n".join([head, *lines, "intr 0", f"ctxt {int(self._ctxt)}", f"btime {btime}"])
        self._file.write((body + "\nprocesses 1\nprocs_running 1\nprocs_blocked 0\n").encode())

    def close(self) -> None:
        self._file.close()


PART = VcpuPart
