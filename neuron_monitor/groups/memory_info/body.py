"""The body of ``memory_info``, defined once: the collector builds a `MemoryInfoBody`, the spec reads these keys.

AWS's report spelling; every value is a whole number of bytes. ``tests/groups/test_group_bodies.py`` checks that
the key constants are the TypedDict's keys and that the collector's body has exactly them.
"""

from __future__ import annotations

from typing import Final, TypedDict


class MemoryInfoBody(TypedDict):
    """What one collection returns (the scheduler adds ``period``, ``error`` and ``fresh``)."""

    memory_total_bytes: int  # MemTotal
    memory_used_bytes: int  # MemTotal - MemAvailable (else - MemFree - Buffers - Cached), at least 0
    swap_total_bytes: int  # SwapTotal
    swap_used_bytes: int  # SwapTotal - SwapFree, at least 0


MEMORY_TOTAL_BYTES: Final = "memory_total_bytes"
MEMORY_USED_BYTES: Final = "memory_used_bytes"
SWAP_TOTAL_BYTES: Final = "swap_total_bytes"
SWAP_USED_BYTES: Final = "swap_used_bytes"
FIELDS: Final = (MEMORY_TOTAL_BYTES, MEMORY_USED_BYTES, SWAP_TOTAL_BYTES, SWAP_USED_BYTES)  # in report order
