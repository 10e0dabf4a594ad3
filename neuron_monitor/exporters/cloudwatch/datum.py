"""One CloudWatch metric datum as the exporter carries it, and its PutMetricData encoding.

A ``Datum`` is either a single sample (``value``) or, after packing, several samples of the same series that fall
into the same storage bucket (``values`` + ``counts``, as CloudWatch's ``Values``/``Counts``). ``to_api`` returns the
dict boto3 expects; ``wire_size`` is an upper bound of the bytes the datum adds to a request in the given protocol.
"""

from __future__ import annotations

from dataclasses import dataclass

Dims = tuple[tuple[str, str], ...]

PERCENT = "Percent"
BYTES = "Bytes"
COUNT = "Count"
SECONDS = "Seconds"
COUNT_PER_SECOND = "Count/Second"
UNITS: frozenset[str] = frozenset({PERCENT, BYTES, COUNT, SECONDS, COUNT_PER_SECOND, "None"})


@dataclass(slots=True)
class Datum:
    name: str
    unit: str
    dims: Dims
    timestamp: float  # epoch seconds
    value: float = 0.0
    values: list[float] | None = None  # set once samples were merged
    counts: list[int] | None = None
    resolution: int = 60

    def samples(self) -> int:
        """How many samples this datum carries (CloudWatch's SampleCount)."""
        return sum(self.counts) if self.counts is not None else 1

    def sample_values(self) -> list[tuple[float, int]]:
        if self.values is None or self.counts is None:
            return [(self.value, 1)]
        return list(zip(self.values, self.counts, strict=True))

    def to_api(self) -> dict[str, object]:
        d: dict[str, object] = {
            "MetricName": self.name,
            "Dimensions": [{"Name": n, "Value": v} for n, v in self.dims],
            "Timestamp": self.timestamp,
            "Unit": self.unit,
        }
        if self.values is not None and self.counts is not None:
            d["Values"] = self.values
            d["Counts"] = [float(c) for c in self.counts]
        else:
            d["Value"] = self.value
        if self.resolution != 60:
            d["StorageResolution"] = self.resolution
        return d

    def wire_size(self, protocol: str = "json") -> int:
        return datum_wire_size(self.name, self.unit, self.dims, len(self.values or ()) or 1, protocol)


# Upper bounds of one number's text ('-1.2345678901234567e-123' is 24 characters) and of a request member index.
_NUM = 24
_QUERY_PREFIX = len("MetricData.member.1000.")


def datum_wire_size(name: str, unit: str, dims: Dims, n_values: int, protocol: str = "json") -> int:
    """Upper bound of a datum's encoded size. ``query`` (form-encoded, the largest) or JSON (also bounds CBOR)."""
    if protocol == "query":
        # every field is "MetricData.member.N.<path>=<value>&"; percent-encoding can triple a character
        size = _QUERY_PREFIX + len("MetricName=&") + 3 * len(name)
        size += _QUERY_PREFIX + len("Unit=&") + 3 * len(unit)
        size += _QUERY_PREFIX + len("Timestamp=2026-01-01T00%3A00%3A00.000000Z&")
        size += _QUERY_PREFIX + len("StorageResolution=60&")
        for i, (dn, dv) in enumerate(dims, 1):
            p = _QUERY_PREFIX + len(f"Dimensions.member.{i}.")
            size += p + len("Name=&") + 3 * len(dn) + p + len("Value=&") + 3 * len(dv)
        per_value = 2 * (_QUERY_PREFIX + len("Values.member.150=&")) + 2 * _NUM
        return size + (per_value * n_values if n_values > 1 else _QUERY_PREFIX + len("Value=&") + _NUM)
    # JSON: {"MetricName":"..","Dimensions":[{"Name":"..","Value":".."},..],"Timestamp":..,"Unit":"..",
    #        "Value":.. | "Values":[..],"Counts":[..],"StorageResolution":..}; escapes can double a character
    size = len('{"MetricName":"","Dimensions":[],"Timestamp":,"Unit":"","StorageResolution":60},') + _NUM
    size += 2 * len(name) + 2 * len(unit)
    for dn, dv in dims:
        size += len('{"Name":"","Value":""},') + 2 * len(dn) + 2 * len(dv)
    if n_values > 1:
        size += len(',"Values":[],"Counts":[]') + n_values * (2 * _NUM + 2)
    else:
        size += len(',"Value":') + _NUM
    return size
