"""Host groups: vcpu_usage and memory_info on fixture roots and the live host."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neuron_monitor.groups.memory_info.collector import MemoryInfo, memory_from_meminfo
from neuron_monitor.groups.vcpu_usage import spec as vcpu_spec
from neuron_monitor.groups.vcpu_usage.collector import SharesMemo, VcpuUsage, usage_percent
from neuron_monitor.groups.vcpu_usage.spec import busy_percent
from neuron_monitor.host.procfs import ProcStat, parse_meminfo, parse_stat
from neuron_monitor.host.rootfs import KeptFile, RootFS
from neuron_monitor.util.errors import GroupError
from tests.conftest import group_testdata


def test_usage_percent_shares() -> None:
    prev = (100, 0, 50, 800, 50, 0, 0, 0)
    cur = (200, 0, 100, 1600, 100, 0, 0, 0)  # delta 100/0/50/800/50 of 1000
    u = usage_percent(prev, cur)
    assert u == {"user": 10.0, "nice": 0.0, "system": 5.0, "idle": 80.0, "io_wait": 5.0, "irq": 0.0, "soft_irq": 0.0}


def test_usage_percent_no_time_passed_and_counter_reset() -> None:
    same = (1, 2, 3, 4, 5, 6, 7, 8)
    assert set(usage_percent(same, same).values()) == {0.0}
    assert usage_percent((10, 0, 0, 10, 0, 0, 0, 0), (5, 0, 0, 20, 0, 0, 0, 0))["idle"] == 100.0


def test_no_time_passed_is_no_utilization_for_its_consumers() -> None:
    """All shares 0 (two identical samples: a replayed capture's frozen /proc/stat) is not 0 % idle, so neither
    CloudWatch's HostVCpuUtilization nor top's host CPU bar says 100 % busy: they leave it out / show '-'."""
    same = (1, 2, 3, 4, 5, 6, 7, 8)
    frozen = usage_percent(same, same)
    assert busy_percent(frozen) is None
    assert busy_percent(usage_percent(same, (11, 2, 3, 94, 5, 6, 7, 8))) == 10.0
    value = vcpu_spec.VcpuUsage(average=frozen, vcpu_count=1, context_switches=0.0, _per_vcpu={"0": frozen})
    names = {metric.name for metric, *_ in vcpu_spec.datums(value, 1.0, per_vcpu=True)}
    assert "HostVCpuUsage" in names and "HostVCpuUtilization" not in names
    ((_, _, busy, text),) = vcpu_spec.top_bars(value)
    assert busy is None and text.strip() == "-"


def _bump_stat(path: Path, user_delta: int, idle_delta: int, ctxt_delta: int) -> None:
    lines = path.read_text().splitlines()
    out = []
    for line in lines:
        parts = line.split()
        if parts and parts[0].startswith("cpu"):
            ncpu = 192 if parts[0] == "cpu" else 1
            parts[1] = str(int(parts[1]) + user_delta * ncpu)
            parts[4] = str(int(parts[4]) + idle_delta * ncpu)
            line = " ".join(parts)
        elif parts and parts[0] == "ctxt":
            line = f"ctxt {int(parts[1]) + ctxt_delta}"
        out.append(line)
    path.write_text("\n".join(out) + "\n")


def test_vcpu_usage_on_192_cpu_root(fake_root_192: Path) -> None:
    g = VcpuUsage(RootFS(fake_root_192))
    g.prime()
    _bump_stat(fake_root_192 / "proc" / "stat", user_delta=25, idle_delta=75, ctxt_delta=4242)
    body = g.collect()
    assert len(body["usage_data"]) == 192
    assert body["usage_data"]["191"]["user"] == 25.0
    assert body["usage_data"]["0"]["idle"] == 75.0
    assert body["average_usage"]["user"] == 25.0
    assert body["context_switch_count"] == 4242
    g.close()


def test_vcpu_usage_first_collection_without_prime_is_an_error(fake_root_192: Path) -> None:
    g = VcpuUsage(RootFS(fake_root_192))
    with pytest.raises(GroupError, match="no previous sample"):
        g.collect()
    assert g.collect()["context_switch_count"] == 0  # second collection has a baseline


def test_vcpu_usage_missing_file(tmp_path: Path) -> None:
    g = VcpuUsage(RootFS(tmp_path))
    g.prime()
    with pytest.raises(GroupError, match="proc/stat"):
        g.collect()


class _RecordingFile(KeptFile):
    """A kept file that remembers every sample it handed out (the exact bytes the group computed from)."""

    __slots__ = ("samples",)

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.samples: list[bytes] = []

    def read(self) -> bytes:
        data = super().read()
        self.samples.append(data)
        return data


class _RecordingRoot(RootFS):
    def __init__(self) -> None:
        super().__init__("/")
        self.kept: list[_RecordingFile] = []

    def open_kept(self, rel: str) -> KeptFile:
        f = _RecordingFile(self.path(rel))
        self.kept.append(f)
        return f


def test_vcpu_usage_live_host_shares_sum_to_100() -> None:
    """On the live host the printed shares leave out steal (AWS prints no steal field), so they sum to 100 minus
    the steal share of the same two samples; on a VM with steal they do not reach 100."""
    root = _RecordingRoot()
    g = VcpuUsage(root)
    g.prime()
    start = os.times()
    deadline = time.monotonic() + 60
    while os.times().user - start.user < 0.05:  # burn until this process got CPU time (however loaded the host)
        assert time.monotonic() < deadline, "this process got no CPU time in 60 s"
        sum(i * i for i in range(1000))
    body = g.collect()
    before, after = (parse_stat(s) for s in root.kept[0].samples)
    delta = [max(b - a, 0) for a, b in zip(before.total, after.total, strict=True)]
    steal_share = 100.0 * delta[7] / sum(delta)
    printed = sum(body["average_usage"].values())
    assert abs(printed + steal_share - 100.0) <= 0.05  # 7 fields, each rounded to 0.01
    assert body["average_usage"]["user"] + body["average_usage"]["nice"] > 0  # this process ran (maybe niced)
    assert all(0.0 <= v <= 100.0 for v in body["average_usage"].values())


def test_memory_formula_with_and_without_memavailable() -> None:
    new = memory_from_meminfo(parse_meminfo(group_testdata("memory_info", "meminfo_trn2").read_bytes()))
    assert new["memory_total_bytes"] == 2113929216 * 1024
    assert new["memory_used_bytes"] == (2113929216 - 2050000000) * 1024
    assert new["swap_used_bytes"] == (8388604 - 8000000) * 1024
    old = memory_from_meminfo(parse_meminfo(group_testdata("memory_info", "meminfo_old_kernel").read_bytes()))
    assert old["memory_used_bytes"] == (8000000 - 1000000 - 500000 - 2500000) * 1024


def test_memory_info_live_matches_proc() -> None:
    body = MemoryInfo(RootFS("/")).collect()
    info = parse_meminfo(Path("/proc/meminfo").read_bytes())
    assert body["memory_total_bytes"] == info["MemTotal"]
    assert 0 < body["memory_used_bytes"] < body["memory_total_bytes"]


def test_vcpu_shares_per_cpu_with_mixed_deltas(tmp_path: Path) -> None:
    """Shares are memoized by delta: equal deltas share one result, different deltas never do."""
    proc = tmp_path / "proc"
    proc.mkdir()

    def write(rows: list[tuple[int, int, int]], ctxt: int) -> None:
        total = [sum(r[i] for r in rows) for i in range(3)]
        lines = [f"cpu  {total[0]} 0 {total[1]} {total[2]} 0 0 0 0 0 0"]
        lines += [f"cpu{i} {u} 0 {s} {idle} 0 0 0 0 0 0" for i, (u, s, idle) in enumerate(rows)]
        lines += ["intr 1 2 3", f"ctxt {ctxt}", "btime 1"]
        (proc / "stat").write_text("\n".join(lines) + "\n")

    write([(100, 100, 100)] * 4, 10)
    g = VcpuUsage(RootFS(tmp_path))
    g.prime()
    write([(110, 100, 100), (100, 100, 110), (110, 100, 100), (105, 105, 100)], 20)
    body = g.collect()
    u = body["usage_data"]
    assert u["0"]["user"] == 100.0 and u["2"]["user"] == 100.0
    assert u["1"]["idle"] == 100.0 and u["1"]["user"] == 0.0
    assert u["3"]["user"] == 50.0 and u["3"]["system"] == 50.0
    write([(120, 100, 100), (110, 100, 110), (110, 110, 100), (105, 105, 110)], 30)
    u2 = g.collect()["usage_data"]  # the same deltas on other CPUs in the next period
    assert u2["1"]["user"] == 100.0 and u2["3"]["idle"] == 100.0 and u2["2"]["system"] == 100.0


def test_vcpu_usage_across_cpu_hotplug_and_counter_reset(tmp_path: Path) -> None:
    """A vCPU that went offline is left out, one that appeared waits for its next sample, and a counter that went
    back counts as no time rather than negative shares."""
    proc = tmp_path / "proc"
    proc.mkdir()

    def write(rows: dict[int, tuple[int, int]]) -> None:
        lines = ["cpu  " + " ".join(str(sum(r[k] for r in rows.values())) if k < 2 else "0" for k in range(10))]
        lines += [f"cpu{i} {u} 0 0 {idle} 0 0 0 0 0 0" for i, (u, idle) in rows.items()]
        (proc / "stat").write_text("\n".join([*lines, "intr 1", "ctxt 5"]) + "\n")

    write({0: (100, 100), 1: (100, 100), 2: (100, 100)})
    g = VcpuUsage(RootFS(tmp_path))
    g.prime()
    write({0: (110, 110), 2: (90, 120), 3: (5, 5)})  # cpu1 offline, cpu3 new, cpu2's user went back
    u = g.collect()["usage_data"]
    assert set(u) == {"0", "2"}
    assert u["0"]["user"] == 50.0
    assert u["2"] == {
        "user": 0.0,
        "nice": 0.0,
        "system": 0.0,
        "idle": 100.0,
        "io_wait": 0.0,
        "irq": 0.0,
        "soft_irq": 0.0,
    }
    write({0: (120, 120), 2: (100, 130), 3: (15, 5)})
    assert set(g.collect()["usage_data"]) == {"0", "2", "3"}


def _sample(cpus: dict[int, tuple[int, ...]]) -> ProcStat:
    ids = tuple(cpus)
    return ProcStat(total=(0,) * 8, cpu_ids=ids, counters=[n for c in ids for n in cpus[c]], ctxt=0)


_COUNTERS = st.tuples(*[st.integers(0, 50) for _ in range(8)])


@given(
    st.dictionaries(st.integers(0, 9), st.tuples(_COUNTERS, _COUNTERS), max_size=8),
    st.sets(st.integers(0, 9), max_size=3),
)
def test_vcpu_shares_per_cpu_equal_each_cpus_own_usage(
    samples: dict[int, tuple[tuple[int, ...], tuple[int, ...]]], offline: set[int]
) -> None:
    """`SharesMemo.per_cpu` (the flat counters' deltas grouped per vCPU, shares memoized) gives each vCPU present
    in both samples exactly `usage_percent` of its own two rows, with the same vCPU set or not (``offline``: left
    out of the earlier sample), and the memo never hands one vCPU another delta's shares."""
    prev = _sample({c: rows[0] for c, rows in samples.items() if c not in offline})
    cur = _sample({c: rows[1] for c, rows in samples.items()})
    memo = SharesMemo()
    for _ in range(2):  # the second time every delta comes from the memo
        got = memo.per_cpu(prev, cur)
        want = {str(c): usage_percent(rows[0], rows[1]) for c, rows in samples.items() if c not in offline}
        assert got == want
        assert list(got) == list(want)  # file order
