"""The logical NeuronCore config (LNC): the environment's, else ``<root>/opt/aws/neuron/logical_nc_config``, else
the chip's default; a value the chip cannot take is not used and is said once in the log (it was silent)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import hardware
from neuron_monitor.neuron.hardware import CHIPS, configured_lnc

TRN2 = next(c for c in CHIPS.values() if c.default_lnc == 2)
TRN1 = next(c for c in CHIPS.values() if c.default_lnc == 1)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NEURON_LOGICAL_NC_CONFIG", raising=False)
    monkeypatch.setattr(hardware, "_WARNED", set())


def _root(tmp_path: Path, content: str | None) -> RootFS:
    if content is not None:
        f = tmp_path / hardware.LNC_FILE
        f.parent.mkdir(parents=True)
        f.write_text(content)
    return RootFS(tmp_path)


def test_valid_values_are_used_silently(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert configured_lnc(_root(tmp_path, "NEURON_LOGICAL_NC_CONFIG=1\n"), TRN2) == 1
    assert configured_lnc(_root(tmp_path / "none", None), TRN2) == 2
    assert configured_lnc(_root(tmp_path / "none", None), TRN1) == 1
    assert not caplog.records


@pytest.mark.parametrize(
    ("env", "file", "chip", "named"),
    [
        ("abc", None, TRN2, "NEURON_LOGICAL_NC_CONFIG='abc'"),
        ("3", None, TRN2, "NEURON_LOGICAL_NC_CONFIG='3'"),
        ("2", None, TRN1, "NEURON_LOGICAL_NC_CONFIG='2'"),
        (None, "NEURON_LOGICAL_NC_CONFIG=two\n", TRN2, "logical_nc_config='two'"),
        ("\x1b]52;c;x\x07", None, TRN2, "NEURON_LOGICAL_NC_CONFIG='\\x1b]52;c;x\\x07'"),  # escaped, not sent
    ],
)
def test_a_value_the_chip_cannot_take_is_the_default_said_once(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    env: str | None,
    file: str | None,
    chip: hardware.Chip,
    named: str,
) -> None:
    if env is not None:
        monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", env)
    root = _root(tmp_path, file)
    with caplog.at_level(logging.WARNING, logger="neuron_monitor.neuron.hardware"):
        for _ in range(3):  # read at every collection: said once
            assert configured_lnc(root, chip) == chip.default_lnc
    (record,) = caplog.records
    assert named in record.getMessage() and f"the chip's default, {chip.default_lnc}" in record.getMessage()
