"""The simulator's part for ``memory_info`` (contract: sim/part.py): ``proc/meminfo``, rewritten at the sysfs
interval: the shape's host memory, of which 4 GiB plus the runtimes' host memory is used; no swap."""

from __future__ import annotations

from pathlib import Path

from neuron_monitor.sim.part import Host, SimPart
from neuron_monitor.sim.tree import InPlaceFile

BASE_USED = 4 * 1024**3  # bytes used with no runtime


class MemoryInfoPart(SimPart):
    def __init__(self, name: str, host: Host) -> None:
        super().__init__(name, host)
        self._file = InPlaceFile(Path(host.root) / "proc/meminfo")

    def write(self, now: float) -> None:
        used = BASE_USED + sum(sum(sum(h.values()) for h in rt.host_mem.values()) for rt in self.host.runtimes
                               if rt.state != "stopped")  # fmt: skip
        total_kb = self.host.shape.host_memory // 1024
        free_kb = max(0, total_kb - used // 1024)
        self._file.write(
            (
                f"MemTotal:       {total_kb} kB\nMemFree:        {free_kb} kB\nMemAvailable:   {free_kb} kB\n"
                f"Buffers:        0 kB\nCached:         0 kB\nSwapCached:     0 kB\n"
                f"SwapTotal:      0 kB\nSwapFree:       0 kB\n"
            ).encode()
        )

    def close(self) -> None:
        self._file.close()


PART = MemoryInfoPart
