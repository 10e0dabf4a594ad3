"""Scrape the real pipeline as the CloudWatch agent does (tests/deploy/cloudwatch_agent.py): the add-on's command
line through the image entrypoint, on a simulated trn2u.48xlarge with a fake IMDS, over HTTPS checked against a
CA for the Service's name, OpenMetrics, the agent's name filter; then check what the agent needs.

- Every kept per-core series is attributable by core: it has ``neuroncore`` (a core index of this host) and no
  ``neuron_device_index``, so the agent's pod correlation looks the core up as ``aws.amazon.com/neuroncore``.
- Every name of the agent's rename map is there with the labels the agent reads, and the instance labels
  (``ultraserver_id`` too, for its ``UltraServer`` dimension) are on every kept series.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import orjson
import pytest

from neuron_monitor.sim.temporary import TemporarySimulator
from tests.deploy.cloudwatch_agent import (
    INSTANCE_LABELS,
    LABELS_USED,
    RELABELS,
    RENAMED_BUT_FILTERED,
    RENAMED_SAMPLES,
    Sample,
    kept_samples,
    make_ca_and_server_cert,
    scrape,
)
from tests.deploy.entrypoint_process import ADDON_CONFIG, Entrypoint
from tests.host.fake_imds import METADATA, FakeImds

pytestmark = pytest.mark.e2e
SHAPE = "trn2u.48xlarge"
CORES = 16 * 4  # 16 devices x 4 logical NeuronCores (LNC=2)
JOIN_SERIES = "neuroncore_info"  # the one series pairing a core with its device (value 1; not in the rename map)


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, list[Sample]]]:
    """(content type, body, kept samples) of a scrape once every renamed family is served."""
    tmp = tmp_path_factory.mktemp("agent")
    ca, cert, key = make_ca_and_server_cert(tmp / "tls")
    conf = tmp / "monitor.json"
    conf.write_bytes(orjson.dumps(ADDON_CONFIG))
    metadata = dict(METADATA, **{"instance-type": SHAPE})
    with (
        FakeImds("v2", metadata) as imds,
        TemporarySimulator(SHAPE, runtimes=2, seed=7, exec_rate=200, generic_error_rate=0.01) as sim,
    ):
        args = ["--cert-file", str(cert), "--key-file", str(key), "--port", "0", "--neuron-monitor-config", str(conf)]
        ep = Entrypoint(
            args,
            root=sim.root,
            NEURON_MONITOR_DAEMON_ARGS=f"--imds-endpoint {imds.endpoint} --imds-timeout 10",
        )
        try:
            port = ep.port()
            wanted = set(RENAMED_SAMPLES) | set(RENAMED_BUT_FILTERED)
            deadline = time.monotonic() + 90
            missing: set[str] = wanted
            while time.monotonic() < deadline:
                status, ctype, body = scrape(port, ca)
                if status == 200:
                    served = {line.split("{")[0].split(" ")[0] for line in body.splitlines() if line[:1] != "#"}
                    missing = wanted - served
                    if not missing and 'instance_id="i-' in body:
                        yield ctype, body, kept_samples(body)
                        return
                time.sleep(0.5)
            raise AssertionError(f"never served {sorted(missing)}; log: {''.join(ep.log)[-2000:]}")
        finally:
            assert ep.stop() == 0


def test_the_agent_gets_openmetrics(scraped: tuple[str, str, list[Sample]]) -> None:
    ctype, body, _ = scraped
    assert ctype.startswith("application/openmetrics-text")
    assert body.rstrip().endswith("# EOF")
    assert "# TYPE neuron_hardware info" in body  # the family the agent's rename map calls neuron_hardware


def test_every_per_core_series_is_attributable_by_core(scraped: tuple[str, str, list[Sample]]) -> None:
    _, _, samples = scraped
    per_core = [(n, lab) for n, lab, _ in samples if "neuroncore" in lab and n != JOIN_SERIES]
    assert {n for n, _ in per_core} >= {
        "neuroncore_utilization_ratio",
        "neuroncore_memory_usage_tensors",
        "neuroncore_memory_usage_model_code",
    }
    for name, labels in per_core:
        assert "neuron_device_index" not in labels, (name, labels)
        assert 0 <= int(labels["neuroncore"]) < CORES, (name, labels)  # device = core // per-device count
    # after the agent's relabels a core series has NeuronCore and no NeuronDevice: correlated by core
    for name, labels in per_core:
        dims = {RELABELS.get(k, k) for k in labels}
        assert "NeuronCore" in dims and "NeuronDevice" not in dims, name
    assert JOIN_SERIES not in RENAMED_SAMPLES


def test_every_name_and_label_of_the_rename_map_is_present(scraped: tuple[str, str, list[Sample]]) -> None:
    _, body, samples = scraped
    kept_names = {n for n, _, _ in samples}
    assert set(RENAMED_SAMPLES) <= kept_names, sorted(set(RENAMED_SAMPLES) - kept_names)
    for name in RENAMED_BUT_FILTERED:  # served, and dropped by the agent's filter as it is for AWS's exporter
        assert f"\n{name}{{" in body and name not in kept_names
    for name, needed in LABELS_USED.items():
        for _, labels, _ in (s for s in samples if s[0] == name):
            assert needed <= labels.keys(), (name, sorted(needed - labels.keys()))
    for name, labels, _ in samples:
        if name.startswith("neuron_exporter_") or name.startswith("neuron_monitor_"):
            continue  # the exporter's and daemon's own health series
        assert labels.keys() >= INSTANCE_LABELS, (name, sorted(INSTANCE_LABELS - labels.keys()))
        assert labels["instance_id"] == METADATA["instance-id"] and labels["instance_type"] == SHAPE
        assert labels["ultraserver_id"] == "u-9ff5434815c8bd80"  # -> UltraServer
    hardware = [lab for n, lab, _ in samples if n == "neuron_hardware_info"]
    assert hardware == [hardware[0]] and hardware[0]["neuroncore_per_device_count"] == "4"
    assert int(hardware[0]["neuron_device_count"]) * 4 == CORES


def test_values_the_agent_filters_on_are_there(scraped: tuple[str, str, list[Sample]]) -> None:
    """The agent keeps latency p50 only and runtime memory at neuron_device only: both must exist."""
    _, _, samples = scraped
    assert any(n == "execution_latency_seconds" and lab["percentile"] == "p50" for n, lab, _ in samples)
    assert any(
        n == "neuron_runtime_memory_used_bytes" and lab["memory_location"] == "neuron_device" for n, lab, _ in samples
    )
    events = {lab["event_type"] for n, lab, _ in samples if n == "hardware_ecc_events_total"}
    assert {"mem_ecc_corrected", "mem_ecc_uncorrected", "sram_ecc_corrected", "sram_ecc_uncorrected"} <= events
