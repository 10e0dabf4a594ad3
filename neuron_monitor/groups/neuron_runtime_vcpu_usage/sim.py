"""The simulator's part for ``neuron_runtime_vcpu_usage`` (contract: sim/part.py): ``proc/uptime`` (the group
takes a process's lifetime from it), rewritten at the sysfs interval; the host booted 1,000 s before the
simulator started. The processes themselves are real: each runtime is a worker process, ``proc/<pid>`` a link to
the real ``/proc/<pid>`` (the simulator's workload makes them)."""

from __future__ import annotations

from pathlib import Path

from neuron_monitor.sim.part import Host, SimPart
from neuron_monitor.sim.tree import InPlaceFile


class UptimePart(SimPart):
    def __init__(self, name: str, host: Host) -> None:
        super().__init__(name, host)
        self._file = InPlaceFile(Path(host.root) / "proc/uptime")
        self._boot = 0.0

    def begin(self, now: float) -> None:
        self._boot = now - 1000.0

    def write(self, now: float) -> None:
        up = now - self._boot
        self._file.write(b"%.2f %.2f\n" % (up, up * self.host.shape.vcpus * 0.8))

    def close(self) -> None:
        self._file.close()


PART = UptimePart
