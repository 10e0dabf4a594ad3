"""End to end over HTTP with a real moto server: replayed real reports, the real daemon piped into the exporter,
Throttling/503 for a while through a fault-injecting proxy, network down with the bounded buffer, SIGTERM flush.
Every test compares what moto stored per series (GetMetricData SampleCount and Sum, ListMetrics) with the datums
the reports map to: nothing lost, nothing stored twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from neuron_monitor.exporters.cloudwatch.datum import Datum
from neuron_monitor.exporters.cloudwatch.mapping import MapOptions, ReportMapper
from tests.exporters.cloudwatch.conftest import (
    FaultProxy,
    aws_env,
    cw_client,
    encode_lines,
    expected_totals,
    exporter_cmd,
    free_port,
    listed_series,
    report_sequence,
    stored_totals,
)

pytestmark = pytest.mark.e2e

FAST_RETRY = ["--retry-base-delay", "0.05", "--retry-max-delay", "0.5"]


def summary(stderr: bytes) -> dict[str, Any]:
    (line,) = [x for x in stderr.decode().splitlines() if " summary " in x]
    return orjson.loads(line.split(" summary ", 1)[1])


def mapped(reports: list[dict[str, Any]]) -> list[Datum]:
    """The datums the command sends for ``reports``: one mapper, the command's default series detail (budget)."""
    mapper = ReportMapper(options=MapOptions(detail="budget"))
    return [d for r in reports for d in mapper.map(r)]


def assert_stored_exactly(url: str, namespace: str, datums: list[Datum]) -> None:
    client = cw_client(url)
    want = expected_totals(datums)
    stamps = [d.timestamp for d in datums]
    got = stored_totals(client, namespace, sorted(want), min(stamps), max(stamps))
    assert {k: v[0] for k, v in got.items()} == {k: v[0] for k, v in want.items()}  # sample counts: none lost/twice
    for key, (_, total) in want.items():
        assert got[key][1] == pytest.approx(total, rel=1e-9, abs=1e-9), key
    assert listed_series(client, namespace) == set(want)


def test_replayed_reports_one_call_each(moto_url: str, trn1_report: dict[str, Any], wandb_reports: list) -> None:
    now = time.time()
    reports = report_sequence(trn1_report, 4, start=now - 300, step=61)  # four different minutes
    reports += report_sequence(wandb_reports[0], 2, start=now - 30, step=1)
    namespace = "e2e_replay"
    proc = subprocess.run(
        exporter_cmd("--namespace", namespace, "--region", "us-east-1", "--endpoint-url", moto_url),
        input=encode_lines(reports),
        capture_output=True,
        env=aws_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    s = summary(proc.stderr)
    datums = mapped(reports)
    assert s["samples_sent"] == len(datums) and s["requests_ok"] == s["requests"] <= len(reports)
    assert s["retries"] == 0 and s["invalid_samples"] == 0
    assert_stored_exactly(moto_url, namespace, datums)


def test_throttling_and_503_for_a_while_nothing_lost_or_twice(moto_url: str, trn1_report: dict[str, Any]) -> None:
    now = time.time()
    reports = report_sequence(trn1_report, 3, start=now - 200, step=61)
    namespace = "e2e_faults"
    fates = ["throttle", "throttle", "throttle", "503", "503"]
    with FaultProxy(moto_url, lambda n: fates[n] if n < len(fates) else "pass") as proxy:
        proc = subprocess.run(
            exporter_cmd("--namespace", namespace, "--region", "us-east-1", "--endpoint-url", proxy.url, *FAST_RETRY),
            input=encode_lines(reports),
            capture_output=True,
            env=aws_env(),
            timeout=120,
        )
        passed = proxy.count("pass")
    assert proc.returncode == 0, proc.stderr
    s = summary(proc.stderr)
    assert s["throttled"] == 3 and s["server_errors"] == 2 and s["retries"] == 5
    assert s["requests_ok"] == passed and s["unconfirmed_samples"] == 0 and s["unsent_at_exit"] == 0
    datums = mapped(reports)
    assert s["samples_sent"] == len(datums)
    assert_stored_exactly(moto_url, namespace, datums)


def test_sigterm_flushes_what_is_buffered(moto_url: str, trn1_report: dict[str, Any]) -> None:
    """CloudWatch answers 503 while reports are buffered and is back as SIGTERM comes: the stop's delivery (at most
    1 s: the process is gone within 2 s) sends what it can; every sample is then stored once or counted unsent (how
    many go out in that second is the machine's business, so it is not asserted)."""
    now = time.time()
    reports = report_sequence(trn1_report, 2, start=now - 100, step=61)
    namespace = "e2e_sigterm"
    down = threading.Event()
    down.set()
    with FaultProxy(moto_url, lambda n: "503" if down.is_set() else "pass") as proxy:
        proc = subprocess.Popen(
            exporter_cmd("--namespace", namespace, "--region", "us-east-1", "--endpoint-url", proxy.url, *FAST_RETRY),
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=aws_env(),
        )
        assert proc.stdin is not None
        proc.stdin.write(encode_lines(reports))
        proc.stdin.flush()  # stdin stays open: only SIGTERM ends the exporter
        deadline = time.monotonic() + 30
        while proxy.count("503") < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proxy.count("503") >= 3 and proxy.count("pass") == 0  # everything is still buffered
        down.clear()  # CloudWatch is back as the stop begins
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
        proc.stdin.close()
    assert proc.returncode == 0, stderr
    s = summary(stderr)
    datums = mapped(reports)
    assert s["reason"] == "SIGTERM" and s["unconfirmed_samples"] == 0 and s["dropped_samples"] == 0
    assert s["samples_sent"] + s["unsent_at_exit"] == len(datums)
    if s["unsent_at_exit"] == 0:
        assert_stored_exactly(moto_url, namespace, datums)
    else:  # what was sent is stored once
        want = expected_totals(datums)
        stored = stored_totals(cw_client(moto_url), namespace, sorted(want), now - 200, now)
        assert sum(count for count, _ in stored.values()) == s["samples_sent"]


def test_network_down_bounded_buffer_keeps_newest(moto_url: str, trn1_report: dict[str, Any]) -> None:
    now = time.time()
    reports = report_sequence(trn1_report, 4, start=now - 400, step=61)  # 4 x 583 samples, buffer holds 1000
    namespace = "e2e_down"
    port = free_port()  # nothing listens yet: connection refused = network down
    proc = subprocess.Popen(
        exporter_cmd(
            "--namespace",
            namespace,
            "--region",
            "us-east-1",
            "--endpoint-url",
            f"http://127.0.0.1:{port}",
            "--buffer-samples",
            "1000",
            *FAST_RETRY,
        ),
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=aws_env(),
    )
    assert proc.stdin is not None
    proc.stdin.write(encode_lines(reports))
    proc.stdin.flush()
    assert proc.stderr is not None
    err_lines: list[bytes] = []
    reader = threading.Thread(target=lambda: err_lines.extend(iter(proc.stderr.readline, b"")), daemon=True)
    reader.start()
    # the exporter has started (however slowly), its reader took the second report (the buffer overflowed) and its
    # sender failed to connect
    deadline = time.monotonic() + 60
    while not all(any(w in line for line in err_lines) for w in (b"buffer full", b"failed, will retry")):
        assert time.monotonic() < deadline and proc.poll() is None, b"".join(err_lines).decode()
        time.sleep(0.05)
    time.sleep(0.5)  # the last two lines were in the pipe with the second: the reader takes them at once
    with FaultProxy(moto_url, lambda n: "pass", port=port):
        proc.stdin.close()  # EOF: flush and exit
        proc.wait(timeout=60)
        reader.join(timeout=10)
    stderr = b"".join(err_lines)
    assert proc.returncode == 0, stderr
    s = summary(stderr)
    datums = mapped(reports)
    assert s["connection_errors"] >= 1
    assert s["samples_sent"] == 1000 and s["dropped_samples"] == len(datums) - 1000
    assert_stored_exactly(moto_url, namespace, datums[-1000:])  # drop-oldest: the newest 1000 survive
    assert "buffer full" in stderr.decode() and stderr.decode().count("buffer full") == 1  # logged once a minute


def test_daemon_piped_into_exporter(moto_url: str, tmp_path: Path) -> None:
    """The real daemon (host groups, 1 s period) -> the exporter -> moto; the test tees the report lines so it
    can compare what moto stored with exactly what the daemon wrote."""
    conf = tmp_path / "monitor.conf"
    conf.write_text(
        '{"period": "1s", "system_metrics": [{"type": "vcpu_usage"}, {"type": "memory_info"}], "neuron_runtimes": []}'
    )
    namespace = "e2e_daemon"
    env = aws_env(PYTHONPATH=str(Path(__file__).resolve().parents[3]) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    daemon = subprocess.Popen(
        [sys.executable, "-m", "neuron_monitor.daemon.cli", "-c", str(conf), "--no-imds"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    exporter = subprocess.Popen(
        exporter_cmd("--namespace", namespace, "--region", "us-east-1", "--endpoint-url", moto_url),
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert daemon.stdout is not None and exporter.stdin is not None
    lines: list[bytes] = []
    try:
        while len(lines) < 4:
            line = daemon.stdout.readline()
            assert line, "the daemon stopped"
            if not line.strip():  # the resync newline before the first report
                continue
            lines.append(line)
            exporter.stdin.write(line)
            exporter.stdin.flush()
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(20)
    _, stderr = exporter.communicate(timeout=60)  # closes stdin: EOF
    assert exporter.returncode == 0, stderr
    reports = [orjson.loads(line) for line in lines]
    datums = mapped(reports)
    assert {"HostVCpuUtilization", "HostMemoryUsed", "HostContextSwitches"} <= {d.name for d in datums}
    assert summary(stderr)["samples_sent"] == len(datums)
    assert_stored_exactly(moto_url, namespace, datums)


def series_sum(url: str, namespace: str, datums: list[Datum], name: str, **where: str) -> float:
    """Sum stored for the one series of ``name`` whose dimensions include ``where``."""
    (dims,) = {d.dims for d in datums if d.name == name and where.items() <= dict(d.dims).items()}
    key = (name, tuple(sorted(dims)))
    stamps = [d.timestamp for d in datums]
    return stored_totals(cw_client(url), namespace, [key], min(stamps), max(stamps))[key][1]


def test_simulator_daemon_exporter_matches_ground_truth(moto_url: str, tmp_path: Path) -> None:
    """simulator -> daemon -> exporter -> moto: the counts CloudWatch holds equal what the simulated runtimes did."""
    from neuron_monitor.sim.temporary import TemporarySimulator

    conf = tmp_path / "monitor.conf"
    conf.write_text(
        '{"period": "1s", "neuron_runtimes": [{"tag_filter": ".*", "metrics": [{"type": "execution_stats"},'
        ' {"type": "neuroncore_counters"}, {"type": "memory_used"}]}],'
        ' "system_metrics": [{"type": "neuron_hw_counters"}]}'
    )
    namespace = "e2e_sim"
    lines: list[bytes] = []
    with TemporarySimulator("trn1.32xlarge", runtimes=2, seed=5, exec_rate=20, ecc_rate=0) as sim:
        sim.pause()
        tags = [rt["tag"] for rt in sim.truth.runtimes()]
        counters = ("completed", "numerical")
        before = {(t, c): sim.truth.total(t, c) for t in tags for c in counters}
        daemon = subprocess.Popen(
            [sys.executable, "-m", "neuron_monitor.daemon.cli", "--root", str(sim.root), "-c", str(conf), "--no-imds"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=aws_env(),
        )
        exporter = subprocess.Popen(
            exporter_cmd("--namespace", namespace, "--region", "us-east-1", "--endpoint-url", moto_url),
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=aws_env(),
        )
        assert daemon.stdout is not None and exporter.stdin is not None

        def pump(n: int) -> float:
            """Pass ``n`` reports on; the report time of the last."""
            for _ in range(n):
                line = daemon.stdout.readline()  # type: ignore[union-attr]
                assert line, "the daemon stopped"
                if not line.strip():  # the resync newline before the first report
                    line = daemon.stdout.readline()  # type: ignore[union-attr]
                lines.append(line)
                exporter.stdin.write(line)  # type: ignore[union-attr]
                exporter.stdin.flush()  # type: ignore[union-attr]
            return float(orjson.loads(lines[-1])["report_time"])

        try:
            while len(orjson.loads(lines[-1] if lines else b'{"neuron_runtime_data": []}')["neuron_runtime_data"]) < 2:
                pump(1)  # the daemon is running and has its baselines of both runtimes
            sim.resume()
            pump(3)
            sim.pause()
            sim.inject("numerical_burst", tag=tags[0], count=7)
            sim.inject("ecc_corrected", device=3, count=4, memory="mem")
            final = time.time()
            while pump(1) <= final:  # reports collected before (or while) the counts became final
                pass
            pump(1)  # collected wholly after: every group runs every report (all at 1 s)
            after = {(t, c): sim.truth.total(t, c) for t in tags for c in counters}
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(20)
        _, stderr = exporter.communicate(timeout=60)
    assert exporter.returncode == 0, stderr
    reports = [orjson.loads(line) for line in lines]
    datums = mapped(reports)
    assert summary(stderr)["samples_sent"] == len(datums)
    assert_stored_exactly(moto_url, namespace, datums)
    for tag in tags:
        done = after[(tag, "completed")] - before[(tag, "completed")]
        assert done > 0
        assert series_sum(moto_url, namespace, datums, "ExecutionCompleted", RuntimeTag=tag) == done
        numerical = after[(tag, "numerical")] - before[(tag, "numerical")]
        assert series_sum(moto_url, namespace, datums, "ExecutionErrorsNumerical", RuntimeTag=tag) == numerical
    assert after[(tags[0], "numerical")] - before[(tags[0], "numerical")] >= 7
    ecc = series_sum(moto_url, namespace, datums, "NeuronDeviceMemEccCorrected", NeuronDevice="3")
    assert ecc == 4
