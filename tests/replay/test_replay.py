"""Nothing changes for users: recorded reports through today's consumers give the bytes recorded before issue 26.

The goldens (``golden/<input>.<consumer>.gz``) were made by ``tests.replay.make_goldens`` with the consumers of
main at 925af8f (2026-11-26, before the one-folder-per-group restructuring), from the inputs in ``recorded/``
(``tests.replay.record``: the real daemon on simulated trn1.32xlarge, trn2.48xlarge with 16 runtimes and
trn3.48xlarge hosts, with injected errors, ECC events, a hung and an exiting runtime) and AWS's own real reports
(``tests/fixtures/reports/``). Each consumer runs as `tests.replay.consumers` describes: the Prometheus /metrics
body (full series set, created series), CloudWatch EMF lines (two dimension schemes), ``neuron-monitor-trace`` for
every ``--group-by`` and ``neuron-monitor-det`` (problem lines and highlighted trace). A refactoring must leave
every byte as it was; a change for users regenerates the goldens in the commit that makes it, and says so.
"""

from __future__ import annotations

import difflib
import gzip

import pytest

from tests.replay.consumers import CONSUMERS
from tests.replay.inputs import golden_path, inputs

INPUTS = inputs()
CASES = [(name, consumer) for name in INPUTS for consumer in CONSUMERS]


def test_every_input_has_goldens() -> None:
    assert {"sim_trn1_32xlarge", "sim_trn2_48xlarge_16rt", "sim_trn3_48xlarge"} <= set(INPUTS)
    assert any(name.startswith("aws_") for name in INPUTS)
    for name, consumer in CASES:
        assert golden_path(name, consumer).is_file(), f"no golden for {name} {consumer}"


@pytest.mark.parametrize(("name", "consumer"), CASES)
def test_replay_is_byte_identical(name: str, consumer: str) -> None:
    want = gzip.decompress(golden_path(name, consumer).read_bytes())
    got = CONSUMERS[consumer](INPUTS[name])
    if got != want:
        diff = difflib.unified_diff(
            want.decode(errors="replace").splitlines(),
            got.decode(errors="replace").splitlines(),
            "golden",
            "now",
            n=1,
            lineterm="",
        )
        pytest.fail(f"{name} through {consumer} changed:\n" + "\n".join(line[:300] for line in list(diff)[:40]))
