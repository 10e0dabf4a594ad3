"""efa_counters on EFA trees built from real-format bytes: per-period counts exactly once, resets, missing
counters, link state and rate, the PCI join (known, unknown, never guessed), no adapters, vanished ports."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from neuron_monitor.groups.efa_counters.body import PORT_COUNTERS
from neuron_monitor.groups.efa_counters.collector import EfaCounters
from neuron_monitor.groups.efa_counters.topology import join, neuron_places
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import pci
from neuron_monitor.util.errors import GroupError
from tests.groups.efa_tree import add_adapter, add_neuron, port_files, set_counter, switch


def _port(body: dict, device: str) -> dict:
    return next(p for p in body["efa_ports"] if p["efa_device"] == device)


def test_counts_once_per_period_and_reset(tmp_path: Path) -> None:
    port = add_adapter(tmp_path, "rdmap16s27", switch(0, 0))
    add_neuron(tmp_path, 0, switch(0, 1))
    g = EfaCounters(RootFS(tmp_path))
    g.prime()
    body = g.collect()
    assert "error" not in body
    p = _port(body, "rdmap16s27")
    assert p["port"] == "1" and p["state"] == "ACTIVE" and p["link_up"] is True and p["rate_gbps"] == 100.0
    assert p["pci_address"] == "0000:03:00.0" and p["neuron_device_indexes"] == [0]
    assert sorted(p["counters"]) == sorted(PORT_COUNTERS)
    assert set(p["counters"].values()) == {0}  # history before the start is not reported
    set_counter(port, "tx_bytes", 1849267712004 + 5000)
    set_counter(port, "retrans_pkts", 2258 + 7)
    p = _port(g.collect(), "rdmap16s27")
    assert p["counters"]["tx_bytes"] == 5000 and p["counters"]["retrans_pkts"] == 7
    assert _port(g.collect(), "rdmap16s27")["counters"]["tx_bytes"] == 0  # counted once
    set_counter(port, "tx_bytes", 300)  # the adapter was reset: counts from 0, never negative
    assert _port(g.collect(), "rdmap16s27")["counters"]["tx_bytes"] == 300
    set_counter(port, "tx_bytes", 1 << 64)  # past 64 bits: an error for that counter, the others carry on
    set_counter(port, "rx_bytes", 1849105264112 + 10)
    body = g.collect()
    assert "tx_bytes of rdmap16s27 port 1: 18446744073709551616 is past 64 bits" in body["error"]
    assert "tx_bytes" not in _port(body, "rdmap16s27")["counters"]
    assert _port(body, "rdmap16s27")["counters"]["rx_bytes"] == 10
    set_counter(port, "tx_bytes", 700)  # readable again: a new baseline (util/counters.py), nothing counted
    assert _port(g.collect(), "rdmap16s27")["counters"]["tx_bytes"] == 0
    set_counter(port, "tx_bytes", 750)
    assert _port(g.collect(), "rdmap16s27")["counters"]["tx_bytes"] == 50
    g.close()


def test_missing_counters_named_others_reported(tmp_path: Path) -> None:
    add_adapter(tmp_path, "rdmap16s27", switch(0, 0), port_files("port_files_no_network.txt"))
    add_adapter(tmp_path, "rdmap24s27", switch(1, 0), port_files("port_files_no_network.txt"))
    g = EfaCounters(RootFS(tmp_path))
    g.prime()
    body = g.collect()
    assert (
        "retrans_bytes, retrans_pkts, retrans_timeout_events, unresponsive_remote_events, "
        "impaired_remote_conn_events not exposed by the kernel for rdmap16s27 port 1, rdmap24s27 port 1"
    ) in body["error"]
    assert "tx_bytes" in _port(body, "rdmap24s27")["counters"]


def test_link_down_and_rate(tmp_path: Path) -> None:
    port = add_adapter(tmp_path, "efa_0", switch(0, 0))
    g = EfaCounters(RootFS(tmp_path))
    g.prime()
    (port / "state").write_bytes(b"1: DOWN\n")
    (port / "rate").write_bytes(b"2.5 Gb/sec (1X SDR)\n")
    p = _port(g.collect(), "efa_0")
    assert p["state"] == "DOWN" and p["link_up"] is False and p["rate_gbps"] == 2.5
    (port / "state").write_bytes(b"garbage\n")
    body = g.collect()
    assert "state of efa_0 port 1: expected '<code>: <STATE>'" in body["error"]


def test_join_known_shared_and_unknown(tmp_path: Path) -> None:
    # trn1.32xlarge-like: one adapter and two Neuron devices per switch
    for s in range(2):
        add_adapter(tmp_path, f"rdmap{s}s0", switch(s, 0))
        add_neuron(tmp_path, 2 * s, switch(s, 1))
        add_neuron(tmp_path, 2 * s + 1, switch(s, 2))
    body = EfaCounters(RootFS(tmp_path)).collect()
    assert _port(body, "rdmap0s0")["neuron_device_indexes"] == [0, 1]
    assert _port(body, "rdmap1s0")["neuron_device_indexes"] == [2, 3]
    # the public driver's class devices have no PCI parent: unknown, never guessed
    other = tmp_path / "virtual"
    add_adapter(other, "rdmap0s0", switch(0, 0))
    add_neuron(other, 0, None)
    body = EfaCounters(RootFS(other)).collect()
    assert _port(body, "rdmap0s0")["neuron_device_indexes"] == []
    assert not body.get("error")  # an unknown join is no failure (every real host today): the label stays empty


def test_join_needs_a_shared_bridge() -> None:
    efa = ("0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0")
    near = ("0000:00:01.0", "0000:01:00.0", "0000:02:01.0", "0000:04:00.0")
    far = ("0000:00:02.0", "0000:09:00.0")
    assert join(efa, {0: near, 1: far}) == (0,)
    assert join(efa, {1: far}) == ()  # only the root complex in common
    assert join(None, {0: near}) == ()


def test_no_adapters_is_an_error_with_an_empty_body(tmp_path: Path) -> None:
    add_neuron(tmp_path, 0, None)
    g = EfaCounters(RootFS(tmp_path))
    g.prime()
    with pytest.raises(GroupError, match="no EFA adapters under /sys/class/infiniband"):
        g.collect()
    mlx = tmp_path / "mlx"  # an RDMA device of another driver is not an EFA adapter
    add_adapter(mlx, "mlx5_0", switch(0, 0))
    (mlx / "sys/bus/pci/drivers/mlx5_core").mkdir(parents=True)
    fdir = mlx / "sys/devices/pci0000:00" / "/".join(switch(0, 0))
    (fdir / "driver").unlink()
    (fdir / "driver").symlink_to("../../../../../../bus/pci/drivers/mlx5_core")
    with pytest.raises(GroupError):
        EfaCounters(RootFS(mlx)).collect()


def test_vanished_port_reported_absent(tmp_path: Path) -> None:
    add_adapter(tmp_path, "rdmap0s0", switch(0, 0))
    port = add_adapter(tmp_path, "rdmap8s0", switch(1, 0))
    root = RootFS(tmp_path)
    g = EfaCounters(root)
    g.prime()
    g.collect()
    (tmp_path / "sys/class/infiniband/rdmap8s0").unlink()
    shutil.rmtree(port.parent.parent)
    root.forget_listing("sys/class/infiniband")
    body = g.collect()
    gone = _port(body, "rdmap8s0")
    assert gone["state"] == "ABSENT" and gone["link_up"] is False and gone["counters"] == {}
    assert "rdmap8s0 port 1 is gone" in body["error"]
    assert _port(body, "rdmap0s0")["state"] == "ACTIVE"


def test_join_from_the_drivers_bdf_answer(tmp_path: Path) -> None:
    # the driver as shipped: no PCI parent, but /dev/neuronN answers NEURON_IOCTL_DEVICE_BDF_EXT with the address
    for s in range(2):
        add_adapter(tmp_path, f"rdmap{s}s0", switch(s, 0))
        add_neuron(tmp_path, 2 * s, None, answer=switch(s, 1))
        add_neuron(tmp_path, 2 * s + 1, None, answer=switch(s, 2))
    body = EfaCounters(RootFS(tmp_path)).collect()
    assert _port(body, "rdmap0s0")["neuron_device_indexes"] == [0, 1]
    assert _port(body, "rdmap1s0")["neuron_device_indexes"] == [2, 3]
    # a driver that refuses the ioctl (EINVAL: one without it): unknown, never guessed, no error
    other = tmp_path / "old"
    add_adapter(other, "rdmap0s0", switch(0, 0))
    add_neuron(other, 0, None, answer=b"EINVAL\n")
    body = EfaCounters(RootFS(other)).collect()
    assert _port(body, "rdmap0s0")["neuron_device_indexes"] == [] and not body.get("error")


def test_bdf_answer_naming_no_pci_function_joins_nothing(tmp_path: Path) -> None:
    add_adapter(tmp_path, "rdmap0s0", switch(0, 0))
    add_neuron(tmp_path, 0, None, answer=pci.pack_answer("0000:77:00.0"))  # no such function in sysfs
    places = neuron_places(RootFS(tmp_path), (0,))
    assert places[0].chain == () and "0000:77:00.0" in places[0].why
    assert _port(EfaCounters(RootFS(tmp_path)).collect(), "rdmap0s0")["neuron_device_indexes"] == []


def test_join_from_the_dra_attribute_where_the_ioctl_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_adapter(tmp_path, "rdmap0s0", switch(0, 0))
    add_adapter(tmp_path, "rdmap1s0", switch(1, 0))
    for i in range(3):
        add_neuron(tmp_path, i, None, answer=b"EINVAL\n")
    # device 0 and 1 name adapter 1's function, device 2 names an address no adapter has: it stays unknown
    dra = {0: switch(1, 0)[-1], 1: switch(1, 0)[-1], 2: "0000:7f:00.0"}
    monkeypatch.setattr(pci, "_dra_efa", dra)
    g = EfaCounters(RootFS(tmp_path))
    body = g.collect()
    assert _port(body, "rdmap0s0")["neuron_device_indexes"] == []
    assert _port(body, "rdmap1s0")["neuron_device_indexes"] == [0, 1]
    pci.set_dra_efa_addresses({0: switch(0, 0)[-1]})  # a new listing: the plan is made again
    body = g.collect()
    assert _port(body, "rdmap0s0")["neuron_device_indexes"] == [0]
    assert _port(body, "rdmap1s0")["neuron_device_indexes"] == []
