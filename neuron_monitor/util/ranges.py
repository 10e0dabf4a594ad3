"""Compact ranges of indices for error texts and labels."""

from __future__ import annotations


def device_ranges(devices: list[int]) -> str:
    """Sorted device indices as compact ranges for error texts: [0, 1, 2, 5] -> "0-2,5"."""
    parts: list[str] = []
    start = prev = devices[0]
    for d in [*devices[1:], None]:
        if d is not None and d == prev + 1:
            prev = d
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if d is not None:
            start = prev = d
    return ",".join(parts)
