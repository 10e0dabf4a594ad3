"""--core-labels: per-core series with AWS's exact label set ('aws') or with neuron_device_index ('device',
the default); neuroncore_info pairs every core with its device in both modes."""

from __future__ import annotations

import subprocess
import sys

import orjson

from neuron_monitor.exporters.prometheus.snapshot import ShapeOptions
from tests.exporters.prometheus.prom_helpers import Series, feed, label_names, one, parse, scrape, select
from tests.exporters.prometheus.prom_reports import CWAGENT_REPORT, runtime, trn2_report

INSTANCE = {"instance_name", "instance_id", "instance_type", "availability_zone", "region", "subnet_id"}
AWS = ShapeOptions(core_device_label=False)


def per_core_families(series: Series) -> set[str]:
    return {name for (name, labels) in series if any(k == "neuroncore" for k, _ in labels)}


def test_aws_mode_gives_awss_exact_label_sets_on_a_real_report() -> None:
    series = parse(scrape(feed([orjson.loads(CWAGENT_REPORT.read_bytes())], AWS)))
    # AWS's exporter: instance labels + runtime_tag + neuroncore (+ memory_location on the memory families)
    assert label_names(series, "neuroncore_utilization_ratio") == {frozenset(INSTANCE | {"runtime_tag", "neuroncore"})}
    for kind in ("constants", "model_code", "model_shared_scratchpad", "runtime_memory", "tensors"):
        assert label_names(series, f"neuroncore_memory_usage_{kind}") == {
            frozenset(INSTANCE | {"runtime_tag", "neuroncore", "memory_location"})
        }
    # device-level series keep their device label, as AWS's do
    assert label_names(series, "hardware_ecc_events_total") == {
        frozenset(INSTANCE | {"neuron_device_index", "event_type"})
    }


def test_aws_mode_no_per_core_series_but_neuroncore_info_has_a_device() -> None:
    series = parse(scrape(feed([trn2_report([runtime(1, "a", [0, 1, 13], flops=1e12)])], AWS)))
    families = per_core_families(series)
    assert {"neuroncore_utilization_ratio", "neuroncore_physical_utilization_ratio", "neuroncore_info"} <= families
    for name in families - {"neuroncore_info"}:
        assert all("neuron_device_index" not in names for names in label_names(series, name)), name
    assert one(series, "neuroncore_info", neuroncore="13") == 1
    assert select(series, "neuroncore_info", neuroncore="13", neuron_device_index="3")


def test_device_mode_is_the_default_and_agrees_with_neuroncore_info() -> None:
    series = parse(scrape(feed([trn2_report()], ShapeOptions(series_detail="full"))))  # (info: full detail only)
    info = select(series, "neuroncore_info")
    assert len(info) == 16 * 4  # trn2.48xlarge at LNC=2: 16 devices x 4 logical cores
    device_of = {dict(lab)["neuroncore"]: dict(lab)["neuron_device_index"] for lab in info}
    assert device_of["0"] == "0" and device_of["63"] == "15"
    for labels in select(series, "neuroncore_utilization_ratio"):
        d = dict(labels)
        assert d["neuron_device_index"] == device_of[d["neuroncore"]]


def test_neuroncore_info_needs_usable_hardware_counts() -> None:
    report = trn2_report()
    report["neuron_hardware_info"]["neuron_device_count"] = 10**9  # not a real host: no series, no blow-up
    assert not select(parse(scrape(feed([report]))), "neuroncore_info")
    report["neuron_hardware_info"] = {"error": "no Neuron devices found", "neuron_device_count": 0}
    assert not select(parse(scrape(feed([report]))), "neuroncore_info")


def test_cli_accepts_only_known_modes() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "neuron_monitor.exporters.prometheus.cli", "--core-labels", "bogus"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "--core-labels" in run.stderr
