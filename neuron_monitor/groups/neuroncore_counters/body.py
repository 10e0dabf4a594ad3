"""The body of ``neuroncore_counters``, defined once: the collector (and its compiled twin, `_native.c` ``cores``,
checked against these names by ``tests/groups/test_group_bodies.py``) builds a `NeuroncoreCountersBody`, the spec
reads these keys.

AWS's report spelling. A core's entry is a plain dict: besides `CoreEntry`'s keys a logical core (LNC=2) carries
its physical breakdown under a key named after the core version plus "d" (``"v3d": {"nc_v3.0":
{"neuroncore_utilization": ..}, ..}``), a name no TypedDict can declare (`PHYSICAL_BREAKDOWN_KEY`).
"""

from __future__ import annotations

import re
from typing import Any, Final, TypedDict


class CoreEntry(TypedDict, total=False):
    """The known keys of one core's entry (``flops`` is left out for a period whose MAC count was damaged; AWS's
    own reports may carry ``effective_flops``, which this daemon does not write)."""

    neuroncore_utilization: float  # percent of the period the core was busy (a logical core: its cores' mean)
    flops: int  # floating-point operations per second over the period (a logical core: the sum)
    effective_flops: int


class _InUse(TypedDict):
    neuroncores_in_use: dict[str, dict[str, Any]]  # flat logical core index as text -> its entry (CoreEntry + ...)


class NeuroncoreCountersBody(_InUse, total=False):
    """One application's object; a data-block group writes its own ``period`` when it knows it."""

    period: float


NEURONCORES_IN_USE: Final = "neuroncores_in_use"
PERIOD: Final = "period"
NEURONCORE_UTILIZATION: Final = "neuroncore_utilization"
FLOPS: Final = "flops"
EFFECTIVE_FLOPS: Final = "effective_flops"
# A logical NeuronCore (LNC=2) carries its physical cores under a key named after the core version plus "d":
# "v3d" on trn2, "v4d" on trn3, and so on for later chips. Any object-valued member of a core entry is read as
# that breakdown, whatever its name; this pattern names the ones seen so far.
PHYSICAL_BREAKDOWN_KEY: Final = re.compile(r"v[0-9]+d")
