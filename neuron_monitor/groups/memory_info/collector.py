"""System group ``memory_info``: host memory and swap from ``<root>/proc/meminfo`` (its body: body.py).

memory_used_bytes = MemTotal - MemAvailable (what `free` reports as used since procps 3.3.10; kernels before
3.14 lack MemAvailable, then MemTotal - MemFree - Buffers - Cached). swap_used_bytes = SwapTotal - SwapFree.
"""

from __future__ import annotations

from typing import Any

from neuron_monitor.groups.base import SystemGroup
from neuron_monitor.groups.memory_info.body import MemoryInfoBody
from neuron_monitor.host.procfs import parse_meminfo
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.util.errors import GroupError

FIELDS = ("MemTotal", "MemAvailable", "MemFree", "Buffers", "Cached", "SwapTotal", "SwapFree")  # all that is used


def memory_from_meminfo(info: dict[str, int]) -> MemoryInfoBody:
    total = info["MemTotal"]
    if "MemAvailable" in info:
        used = total - info["MemAvailable"]
    else:
        used = total - info.get("MemFree", 0) - info.get("Buffers", 0) - info.get("Cached", 0)
    swap_total = info.get("SwapTotal", 0)
    return MemoryInfoBody(
        memory_total_bytes=total,
        memory_used_bytes=max(used, 0),
        swap_total_bytes=swap_total,
        swap_used_bytes=max(swap_total - info.get("SwapFree", 0), 0),
    )


class MemoryInfo(SystemGroup):
    type_name = "memory_info"

    def __init__(self, root: RootFS) -> None:
        super().__init__(root)
        self._file = root.open_kept("proc/meminfo")

    def collect(self) -> dict[str, Any]:
        try:
            return dict(memory_from_meminfo(parse_meminfo(self._file.read(), FIELDS)))
        except OSError as e:
            raise GroupError(f"open {self._file.path}: {e.strerror or e}") from None
        except ValueError as e:
            raise GroupError(f"parse {self._file.path}: {e}") from None

    def close(self) -> None:
        self._file.close()


GROUP = MemoryInfo
