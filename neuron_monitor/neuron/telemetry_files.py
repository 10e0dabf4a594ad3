"""Parsers for the Neuron driver's device-telemetry files (facts and public sources: docs/neuron-data.md).

Each takes the bytes the driver prints and returns a plain value, or raises ``ValueError`` naming what is wrong:

- ``stats/power/utilization``: ``STATUS,epoch,min%,max%,avg%`` with STATUS ``POWER_STATUS_VALID``,
  ``POWER_STATUS_NO_DATA`` or ``POWER_STATUS_INVALID`` (a once-a-minute roll-up of the device's power draw as a
  share of its maximum);
- ``stats/hardware/health_status/unhealthy_components``: a comma list of components, an empty line when the
  device is healthy, ``device_unreachable`` when the driver could not ask the firmware;
- the counter and memory files: one unsigned decimal integer and a newline (``%llu\n``): `parse_counter` for one
  file, `parse_counters` for a batch read in one pass. They accept exactly the same bytes: ASCII digits with only
  newlines around them, at most 2^64-1. No sign, space, ``_``, or other digit (``int()`` alone takes all of these:
  ``-5`` read as -5 made a negative busy ratio and 65,531 phantom ECC errors).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

POWER_STATUSES = ("VALID", "NO_DATA", "INVALID")
_STATUS_PREFIX = "POWER_STATUS_"
_COMPONENT = re.compile(r"[a-z0-9_]{1,64}")
_EPOCH = re.compile(r"[0-9]{1,12}")  # seconds since the epoch, as the driver prints them (%llu)
_PERCENT = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,6})?")  # 0-100 with up to 6 decimals (the driver prints %.2f)
MAX_COMPONENTS = 32  # the driver knows ten; more means the file is not what we think
DEVICE_UNREACHABLE = "device_unreachable"


@dataclass(frozen=True, slots=True)
class PowerReading:
    """One roll-up of ``power/utilization``: percentages only when the status is VALID."""

    status: str  # VALID, NO_DATA or INVALID
    sample_time: int  # seconds since the epoch of the roll-up
    min_percent: float | None
    max_percent: float | None
    avg_percent: float | None


def parse_power(raw: bytes) -> PowerReading:
    """``POWER_STATUS_VALID,1789180860,12.50,40.00,20.25`` -> PowerReading; ValueError on anything else."""
    text = raw.decode("ascii", "replace").strip()
    parts = text.split(",")
    if len(parts) != 5:
        raise ValueError(f"expected STATUS,epoch,min,max,avg, got {text[:80]!r}")
    status = parts[0].strip()
    if status.startswith(_STATUS_PREFIX):
        status = status[len(_STATUS_PREFIX) :]
    if status not in POWER_STATUSES:
        raise ValueError(f"unknown power status {parts[0][:40]!r}")
    # plain decimals only: int() and float() would also take a sign, spaces, "_" (1_0 = 10.0), "nan" and "1e2"
    if not _EPOCH.fullmatch(parts[1]) or not all(_PERCENT.fullmatch(p) for p in parts[2:]):
        raise ValueError(f"non-numeric field in {text[:80]!r}")
    epoch = int(parts[1])
    values = [float(p) for p in parts[2:]]
    if epoch < 0 or any(not 0.0 <= v <= 100.0 for v in values):  # also refuses nan
        raise ValueError(f"value out of range in {text[:80]!r}")
    if status != "VALID":  # NO_DATA and INVALID print zeros that are not measurements
        return PowerReading(status, epoch, None, None, None)
    return PowerReading(status, epoch, values[0], values[1], values[2])


def parse_unhealthy_components(raw: bytes) -> list[str]:
    """The unhealthy components, [] when healthy; ``["device_unreachable"]`` when the firmware did not answer."""
    text = raw.decode("ascii", "replace").strip()
    if not text:
        return []
    names = [p.strip() for p in text.split(",") if p.strip()]
    if len(names) > MAX_COMPONENTS:
        raise ValueError(f"{len(names)} components listed (at most {MAX_COMPONENTS} expected)")
    for name in names:
        if not _COMPONENT.fullmatch(name):
            raise ValueError(f"unexpected component name {name[:70]!r}")
    return list(dict.fromkeys(names))


MAX_COUNTER = (1 << 64) - 1
_COUNTER_BYTES = b"0123456789\n"
_MAX_DIGITS = len(str(MAX_COUNTER))  # 20: a shorter file cannot hold a value past 64 bits


def parse_counter(raw: bytes) -> int:
    """One counter file's value (see the module docstring); ValueError saying what is wrong otherwise."""
    text = raw.strip(b"\n")
    if not text.isdigit():  # bytes.isdigit: ASCII digits only, and False for b""
        raise ValueError(f"not an unsigned decimal number: {raw[:40]!r}")
    value = int(text)
    if value > MAX_COUNTER:
        raise ValueError(f"past 64 bits: {raw[:40]!r}")
    return value


parse_count = parse_counter  # the earlier name


def parse_counters(raws: list[bytes], read_size: int | None = None) -> list[int] | None:
    """`parse_counter` of every file of a one-pass read, or None when any of them is not what it accepts (the
    caller then parses each file to name the bad one), or when one is ``read_size`` bytes long (it may have been
    cut by the read). Checked in C: the bytes are digits and newlines only, and ``int()`` (which takes surrounding
    whitespace only) finds one number in each; values are compared with 2^64-1 only when a file is long enough
    to hold a larger one (20 bytes)."""
    longest = max(map(len, raws), default=0)
    if read_size is not None and longest >= read_size:
        return None
    if b"".join(raws).translate(None, _COUNTER_BYTES):
        return None
    try:
        values = list(map(int, raws))
    except ValueError:  # empty, newlines only, or a newline between digits
        return None
    if longest >= _MAX_DIGITS and max(values) > MAX_COUNTER:
        return None
    return values
