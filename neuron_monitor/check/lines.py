"""What `neuron-monitor --check` says: one `Line` per source, its text and JSON forms, and the exit code.

A line names a source (``driver version``, ``device 3``, ``neuron_device_health: hardware/mem_ecc_uncorrected``,
``/dev/neuron0 GET_ALL_APPS_INFO``, ...), its status, what was found or why not, and the configured group that
needs it (empty when no configured group does: then it is information, never a reason to fail).

Statuses: ``found``; ``missing`` (not there); ``unreadable`` (there, but reading or asking it failed: the reason is
the detail); ``error`` (a configured group's collection reported an error); ``partial`` (a group that reports
what it has named what it lacks, e.g. files an older driver does not expose: no fault); ``absent`` (the host has
none, which is no fault: no EFA adapter on an inf2); ``unknown`` (cannot be told, e.g. a device's PCI place);
``off`` (not used with these options). Exit 0 when no needed line is missing, unreadable or error; 1 otherwise.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from neuron_monitor.util.sanitize import sanitize

FOUND = "found"
MISSING = "missing"
UNREADABLE = "unreadable"
ERROR = "error"
ABSENT = "absent"
PARTIAL = "partial"
UNKNOWN = "unknown"
OFF = "off"
FAILING = frozenset({MISSING, UNREADABLE, ERROR})
DETAIL_CHARS = 400  # a line's detail is cut here (a group error can be long)


@dataclass(frozen=True, slots=True)
class Line:
    source: str
    status: str
    detail: str = ""
    group: str = ""  # the configured group that needs the source ("" when none does)

    @property
    def needed(self) -> bool:
        return bool(self.group)

    @property
    def failing(self) -> bool:
        """A source a configured group needs is not there (or not readable)."""
        return self.needed and self.status in FAILING

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["detail"] = self.detail[:DETAIL_CHARS]
        out["needed"] = self.needed
        return out


def exit_code(lines: list[Line]) -> int:
    return 1 if any(line.failing for line in lines) else 0


def text(lines: list[Line]) -> str:
    """The lines for a terminal: status, source, detail (and the group that needs it), sanitized."""
    width = min(max((len(line.source) for line in lines), default=10), 60)
    out = []
    for line in lines:
        mark = "!" if line.failing else " "
        need = f" [needed by {line.group}]" if line.failing else ""
        detail = sanitize(line.detail[:DETAIL_CHARS])
        out.append(f"{mark} {line.status:<10} {sanitize(line.source):<{width}}  {detail}{need}".rstrip())
    failing = sum(1 for line in lines if line.failing)
    if failing:
        out.append(f"{failing} source(s) a configured group needs are missing or unreadable (exit 1)")
    else:
        out.append("every source the configured groups need is there (exit 0)")
    return "\n".join(out) + "\n"


def as_json(lines: list[Line], **header: Any) -> dict[str, Any]:
    return {**header, "exit_code": exit_code(lines), "sources": [line.as_json() for line in lines]}
