"""How values read on a terminal (``neuron-monitor-top``'s cells, declared in the group specs): byte sizes,
latencies and finite numbers. Plain functions of a value, returning text."""

from __future__ import annotations


def human_bytes(n: int | None) -> str:
    """1536 -> "1.5K"; None -> "-"."""
    if n is None:
        return "-"
    v = float(n)
    for unit in ("B", "K", "M", "G", "T"):
        if abs(v) < 1024 or unit == "T":
            return f"{v:.0f}{unit}" if unit == "B" else f"{v:.1f}{unit}"
        v /= 1024
    return f"{v:.1f}T"


def latency_text(seconds: float | None) -> str:
    """0.00247 -> "2.47ms"; 12.5 -> "12.5s"; None -> "-"."""
    if seconds is None:
        return "-"
    return f"{seconds * 1000:.2f}ms" if seconds < 10 else f"{seconds:.1f}s"


def finite(v: float | None) -> float | None:
    """A finite number, else None (NaN and infinities, which a JSON parser other than orjson may let through)."""
    return v if v is not None and v - v == 0.0 else None


def count(v: float | None) -> int:
    """A non-negative count (anything else counts as 0)."""
    return int(v) if v is not None and v - v == 0.0 and v > 0 else 0
