"""The efa_counters spec: its reader on a collected body, the Prometheus families and CloudWatch names fixed by the
issue (efa_<counter>_total, efa_link_up; the CloudWatch agent's EFA names), det findings and top cells."""

from __future__ import annotations

from pathlib import Path

from neuron_monitor.groups.efa_counters import spec as K
from neuron_monitor.groups.efa_counters.collector import EfaCounters
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.schema import spec as S
from neuron_monitor.schema.values import Problems
from tests.groups.efa_tree import add_adapter, add_neuron, set_counter, switch


def _value(tmp_path: Path) -> K.EfaCounters:
    port = add_adapter(tmp_path, "rdmap16s27", switch(0, 0))
    add_neuron(tmp_path, 0, switch(0, 1))
    add_neuron(tmp_path, 1, switch(0, 2))
    g = EfaCounters(RootFS(tmp_path))
    g.prime()
    set_counter(port, "tx_pkts", 225743601 + 10_000)
    set_counter(port, "tx_bytes", 1849267712004 + 80_000_000)
    set_counter(port, "retrans_pkts", 2258 + 500)
    set_counter(port, "impaired_remote_conn_events", 1 + 2)
    body = g.collect()
    problems = Problems()
    value = K.read(body, "system_data.efa_counters", problems)
    assert not problems
    return value


def test_names_fixed_by_the_issue() -> None:
    names = {f.name for f in K.SPEC.prometheus}
    assert {"efa_rx_bytes", "efa_tx_bytes", "efa_retrans_pkts", "efa_impaired_remote_conn_events"} <= names
    assert "efa_link_up" in names  # exposed as efa_<counter>_total by the exporter (counters) and efa_link_up
    for fam in K.FAM_COUNTERS.values():
        assert fam.kind == S.COUNTER and fam.labels == ("efa_device", "port", "neuron_device_index")
    cw = {m.name for m in K.SPEC.cloudwatch}
    assert len(K.CW_COUNTERS) == 22 and "efa_rx_dropped" in cw and "efa_unresponsive_remote_events" in cw
    assert all(m.key_dims == ("device", "port") for m in K.SPEC.cloudwatch)


def test_reader_and_consumers(tmp_path: Path) -> None:
    value = _value(tmp_path)
    (p,) = value.ports
    assert (p.device, p.port, p.neuron_label, p.link_up, p.rate_gbps) == ("rdmap16s27", "1", "0,1", True, 100.0)
    counts = {c.family.name: (c.prefix, c.values) for c in K.SPEC.counts(value, 5.0)}  # type: ignore[misc]
    assert counts["efa_tx_bytes"] == (("rdmap16s27", "1"), {"0,1": 80_000_000})
    gauges = {g.family.name: (g.prefix, g.values) for g in K.SPEC.gauges(value)}
    assert gauges["efa_link_up"] == (("rdmap16s27", "1"), {"0,1": 1.0})
    assert gauges["efa_link_rate_bits_per_second"][1] == {"0,1": 100e9}
    datums = {(m.name, key): v for m, key, _, v in K.SPEC.datums(value, 5.0, False)}
    assert datums[("efa_tx_bytes", ("rdmap16s27", "1"))] == 80_000_000
    found = {rule.kind: (key, amount) for rule, key, amount, _ in K.SPEC.findings(value)}
    assert found["efa_retransmit_storm"] == (("EFA rdmap16s27 port 1 (neuron device 0,1)",), 500)
    assert found["efa_impaired_remote_connections"][1] == 2
    assert found["efa_link_down"][1] == 0.0
    cells = list(K.SPEC.top(value, 5.0))
    assert [(c.header, key, text) for c, key, text, _ in cells] == [
        ("efa", ("0",), "16.0MB/s"),
        ("efa", ("1",), "16.0MB/s"),
    ]
    assert all(style == "bold red" for *_, style in cells)  # the storm marks the devices it serves
    samples = list(K.SPEC.timeline(value))  # type: ignore[misc]
    assert (K.TRACK_DEVICE_BYTES, ("0",), {"bytes": 80_000_000 + 0}) in samples


def test_reader_leaves_out_what_is_wrong() -> None:
    problems = Problems()
    body = {"efa_ports": [
        {"efa_device": "a", "port": "1", "counters": {"tx_bytes": "x", "rx_bytes": -5, "tx_pkts": 3}},
        "not a port",
        {"port": "1"},
    ]}  # fmt: skip
    value = K.read(body, "w", problems)
    assert [(p.device, p.counts) for p in value.ports] == [("a", {"tx_pkts": 3})]
    assert problems
