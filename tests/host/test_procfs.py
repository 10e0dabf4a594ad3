"""procfs parsers on fixture files (192 vCPUs, old kernels, odd comm names) and on this machine's live /proc."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from neuron_monitor.host.procfs import (
    _parse_cpu_block_fast,
    _parse_cpu_lines,
    parse_meminfo,
    parse_pid_stat,
    parse_stat,
    parse_uptime,
)
from tests.conftest import group_testdata


def test_stat_192_cpus() -> None:
    st = parse_stat(group_testdata("vcpu_usage", "stat_192cpu").read_bytes())
    assert sorted(st.cpus) == list(range(192))
    assert st.ctxt == 987654321012
    # the aggregate line is the column sum of the per-CPU lines (how the fixture was built, and the kernel's rule)
    for col in range(8):
        assert st.total[col] == sum(c[col] for c in st.cpus.values())


def test_stat_short_cpu_lines_are_padded() -> None:
    st = parse_stat(b"cpu  1 2 3 4\ncpu0 1 2 3 4\nctxt 7\n")
    assert st.total == (1, 2, 3, 4, 0, 0, 0, 0)
    assert st.ctxt == 7


def _stat_bytes(ids: list[int], rows: list[list[int]], sep: str = " ") -> bytes:
    total = [sum(col) for col in zip(*rows, strict=True)]
    lines = ["cpu  " + sep.join(map(str, total))]
    lines += [f"cpu{i}{sep}" + sep.join(map(str, r)) for i, r in zip(ids, rows, strict=True)]
    return ("\n".join([*lines, "intr 5 0 1", "ctxt 99", "btime 1"]) + "\n").encode()


@given(
    st.integers(8, 10).flatmap(
        lambda cols: st.lists(
            st.tuples(st.integers(0, 4095), st.lists(st.integers(0, 2**58), min_size=cols, max_size=cols)),
            min_size=1,
            max_size=40,
            unique_by=lambda r: r[0],
        )
    )
)
def test_stat_fast_path_equals_line_by_line(cpus: list[tuple[int, list[int]]]) -> None:
    """The one-JSON-array parse of the kernel's layout gives exactly what the line-by-line parse gives
    (any CPU numbering with offline gaps, 8 to 10 columns, sums within the kernel's u64)."""
    data = _stat_bytes([i for i, _ in cpus], [r for _, r in cpus])
    block = data[: data.find(b"\nintr ")]
    fast = _parse_cpu_block_fast(block)
    assert fast is not None
    assert fast == _parse_cpu_lines(block)
    st_ = parse_stat(data)
    assert st_.cpu_ids == tuple(i for i, _ in cpus)
    assert st_.cpus == {i: tuple(r[:8]) for i, r in cpus}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(list("cpu \n0123456789,x\t-"))), max_size=4))
@example([(5, ",")])  # "cpu  ,1 2 ...": the stray comma beside the translated spaces was stripped as if one of them
def test_stat_fast_path_on_a_damaged_block_is_none_or_the_line_by_line_result(
    damage: list[tuple[int, str]],
) -> None:
    """Stray characters anywhere in the cpu block (letters of "cpu" included): the one-array parse either declines
    or gives exactly the line-by-line result; it never takes a damaged number as another."""
    data = bytearray(_stat_bytes([0, 1, 3], [[1, 2, 3, 4, 5, 6, 7, 8, 0, 0], [10, 20, 30, 40, 50, 60, 70, 80, 9, 9],
                                             [5, 5, 5, 5, 5, 5, 5, 5, 0, 0]]))  # fmt: skip
    end = data.find(b"\nintr ")
    for at, char in damage:
        data.insert(at % end, ord(char))
        end += 1
    block = bytes(data[:end])
    fast = _parse_cpu_block_fast(block)
    if fast is not None:
        assert fast == _parse_cpu_lines(block)


@pytest.mark.parametrize("sep", ["  ", "\t"])
def test_stat_other_layouts_take_the_line_by_line_path(sep: str) -> None:
    data = _stat_bytes([0, 2], [[1, 2, 3, 4, 5, 6, 7, 8, 0, 0], [10, 20, 30, 40, 50, 60, 70, 80, 0, 0]], sep)
    assert _parse_cpu_block_fast(data[: data.find(b"\nintr ")]) is None
    st_ = parse_stat(data)
    assert st_.cpus == {0: (1, 2, 3, 4, 5, 6, 7, 8), 2: (10, 20, 30, 40, 50, 60, 70, 80)}
    assert st_.total == (11, 22, 33, 44, 55, 66, 77, 88)


def test_live_proc_stat_fast_path_applies() -> None:
    data = Path("/proc/stat").read_bytes()
    block = data[: data.find(b"\nintr ")]
    assert _parse_cpu_block_fast(block) == _parse_cpu_lines(block)


@pytest.mark.parametrize("data", [b"", b"cpu0 1 2 3 4\nctxt 1\n", b"cpu  1 2 3 4\n", b"cpu  a b c d\nctxt 1\n"])
def test_stat_malformed(data: bytes) -> None:
    with pytest.raises(ValueError):
        parse_stat(data)


def test_live_proc_stat_matches_cpu_count() -> None:
    st = parse_stat(Path("/proc/stat").read_bytes())
    assert len(st.cpus) == os.cpu_count()
    assert st.ctxt > 0


def test_meminfo_units_and_hugepages() -> None:
    info = parse_meminfo(group_testdata("memory_info", "meminfo_trn2").read_bytes())
    assert info["MemTotal"] == 2113929216 * 1024
    assert info["HugePages_Total"] == 0  # no unit: not multiplied
    assert info["Hugepagesize"] == 2048 * 1024


def test_meminfo_live() -> None:
    info = parse_meminfo(Path("/proc/meminfo").read_bytes())
    assert info["MemTotal"] > info["MemFree"] > 0


def test_meminfo_without_memtotal_is_an_error() -> None:
    with pytest.raises(ValueError):
        parse_meminfo(b"MemFree: 1 kB\n")


def test_pid_stat_comm_with_spaces_and_parens() -> None:
    st = parse_pid_stat(group_testdata("neuron_runtime_vcpu_usage", "pid_stat_spaces").read_bytes())
    assert (st.utime, st.stime, st.starttime) == (1234, 567, 98765)


def test_pid_stat_live_self() -> None:
    st = parse_pid_stat(Path(f"/proc/{os.getpid()}/stat").read_bytes())
    assert st.starttime > 0
    assert st.utime >= 0


def test_pid_stat_truncated() -> None:
    with pytest.raises(ValueError):
        parse_pid_stat(b"12 (x) S 1 2 3")


def test_uptime() -> None:
    assert parse_uptime(b"12345.67 23456.78\n") == pytest.approx(12345.67)
    assert parse_uptime(Path("/proc/uptime").read_bytes()) > 0


def test_meminfo_with_names_reads_only_the_named_fields() -> None:
    from neuron_monitor.groups.memory_info.collector import FIELDS

    for name in ("meminfo_trn2", "meminfo_old_kernel", "meminfo_host_sample"):
        data = group_testdata("memory_info", name).read_bytes()
        whole = parse_meminfo(data)
        assert parse_meminfo(data, FIELDS) == {k: whole[k] for k in FIELDS if k in whole}
    odd = b"MemTotal: 10 kB\nWeird: not a number kB\nno colon here\nMemFree:\nMemFree: 3 kB\nSwapTotal: 7\n"
    assert parse_meminfo(odd, FIELDS) == {"MemTotal": 10240, "MemFree": 3072, "SwapTotal": 7}
    assert parse_meminfo(b"MemTotal: 1 kB\nMemTotal: 2 kB\n", FIELDS) == {"MemTotal": 2048}  # the last wins
    with pytest.raises(ValueError):
        parse_meminfo(b"MemTotal: x kB\n", FIELDS)
    with pytest.raises(ValueError):
        parse_meminfo(b"MemFree: 1 kB\n", FIELDS)
