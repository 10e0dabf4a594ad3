"""The CloudWatch exporter under a bad day: planted credentials in a debug run, AWS_REGION alone, absurd numeric
flags, and an EMF destination that breaks (EPIPE), fills up (ENOSPC, /dev/full) or is a FIFO.

Before (issue 20): ``--verbose 2`` logged X-Amz-Security-Token (4x) and the access key id (2x); AWS_REGION alone
was ignored; ``--flush-timeout inf`` was an OverflowError traceback; EMF on EPIPE or ENOSPC logged one warning per
report, dropped everything and exited 0; a FIFO ``--emf-file`` without a reader hung start-up.
After: 0 planted secrets in the log; AWS_REGION used; exit 2 with one line; EPIPE exits 1 at once; ENOSPC warns
once a minute and counts its drops; a FIFO without a reader is exit 2, with a reader it receives the events.
Real processes, a real moto server; every wait has a generous deadline and no timing is asserted.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import orjson
import pytest

from tests.exporters.cloudwatch.conftest import (
    aws_env,
    cw_client,
    encode_lines,
    exporter_cmd,
    moto_server,  # noqa: F401 - the session fixture, shared with this module
)

DEADLINE = 60.0
REPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "reports" / "wandb_trn1-2xl_reports.jsonl"
PLANTED_KEY_ID = "AKIAPLANTED7HOSTILE9"
PLANTED_SECRET = "plAnted/Secret+Hostile0123456789abcdefXYZ"
PLANTED_TOKEN = "IQoJb3JpZ2luX2VjEPlantedSessionToken" + "Zm9vYmFy" * 40


def _reports(n: int = 3) -> bytes:
    lines = [orjson.loads(line) for line in REPORTS.read_bytes().splitlines() if line.strip()]
    now = time.time()
    out = []
    for i in range(n):
        r = dict(lines[i % len(lines)])
        r["report_time"] = now - (n - i)
        out.append(r)
    return encode_lines(out)


@pytest.fixture
def cloudwatch_url(moto_server: str) -> str:  # noqa: F811
    """The moto server, emptied first."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_server}/moto-api/reset", method="POST"), timeout=10)
    return moto_server


def _summary(stderr: str) -> dict[str, Any]:
    line = [x for x in stderr.splitlines() if " summary " in x][-1]
    return orjson.loads(line.split(" summary ", 1)[1])  # type: ignore[no-any-return]


def test_debug_run_against_moto_logs_no_planted_credential(cloudwatch_url: str) -> None:
    env = aws_env(
        AWS_ACCESS_KEY_ID=PLANTED_KEY_ID, AWS_SECRET_ACCESS_KEY=PLANTED_SECRET, AWS_SESSION_TOKEN=PLANTED_TOKEN
    )
    cmd = exporter_cmd("--endpoint-url", cloudwatch_url, "--verbose", "4", "--namespace", "hostile_redact")
    done = subprocess.run(cmd, input=_reports(), capture_output=True, env=env, timeout=DEADLINE, check=False)
    err = done.stderr.decode(errors="replace")
    assert done.returncode == 0, err[-3000:]
    assert _summary(err)["datums_sent"] > 0, err[-3000:]  # the requests were made (and logged at debug)
    assert "X-Amz-Security-Token" in err or "x-amz-security-token" in err.lower()  # headers were logged...
    for planted in (PLANTED_KEY_ID, PLANTED_SECRET, PLANTED_TOKEN, PLANTED_TOKEN[:40], PLANTED_SECRET[:20]):
        assert planted not in err  # ...without the values


def test_aws_region_alone_is_honoured(cloudwatch_url: str) -> None:
    env = aws_env(AWS_REGION="eu-west-3")
    del env["AWS_DEFAULT_REGION"]
    cmd = exporter_cmd("--endpoint-url", cloudwatch_url, "--namespace", "hostile_region")
    done = subprocess.run(cmd, input=_reports(), capture_output=True, env=env, timeout=DEADLINE, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    europe = boto3.client(
        "cloudwatch", region_name="eu-west-3", endpoint_url=cloudwatch_url, aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )  # fmt: skip
    assert europe.list_metrics(Namespace="hostile_region")["Metrics"]
    assert not cw_client(cloudwatch_url).list_metrics(Namespace="hostile_region")["Metrics"]  # not in us-east-1


@pytest.mark.parametrize(
    "args",
    [
        ["--flush-timeout", "inf"],
        ["--flush-timeout", "nan"],
        ["--flush-timeout", "-1"],
        ["--flush-timeout", "1e300"],
        ["--retry-base-delay", "nan"],
        ["--retry-max-delay", "inf"],
        ["--buffer-samples", "1e3"],
        ["--buffer-samples", "99999999999999999999"],
        ["--verbose", "9"],
        ["--verbose", "x"],
    ],
)
def test_bad_numbers_exit_2_with_one_line(args: list[str]) -> None:
    done = subprocess.run(exporter_cmd(*args), input=b"", capture_output=True, env=aws_env(), timeout=DEADLINE)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and args[0] in lines[0], err


def test_emf_reader_gone_exits_1_at_once() -> None:
    """stdout's reader closes while reports keep coming on stdin: exit 1, not a warning per report."""
    proc = subprocess.Popen(
        exporter_cmd("--output", "emf"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=aws_env(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdout.close()
    blob = _reports(1)
    stopped = threading.Event()

    def feed() -> None:  # keep stdin open and busy, as a live daemon would
        assert proc.stdin is not None
        while not stopped.is_set():
            try:
                proc.stdin.write(blob)
                proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                return
            time.sleep(0.2)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        code = proc.wait(timeout=DEADLINE)
    finally:
        stopped.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert code == 1, err
    assert "broken pipe" in err
    assert err.count("WARNING") <= 1


def test_emf_full_disk_warns_rate_limited_and_counts_drops() -> None:
    n = 20
    cmd = exporter_cmd("--output", "emf", "--emf-file", "/dev/full")
    done = subprocess.run(cmd, input=_reports(n), capture_output=True, env=aws_env(), timeout=DEADLINE, check=False)
    err = done.stderr.decode()
    assert done.returncode == 0, err
    summary = _summary(err)
    assert summary["reports"] == n
    assert summary["emf_dropped_events"] > 0 and summary["emf_events"] == 0
    assert 1 <= err.count("EMF destination full") < n


def test_emf_fifo_without_reader_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "emf.fifo"
    os.mkfifo(fifo)
    cmd = exporter_cmd("--output", "emf", "--emf-file", str(fifo))
    done = subprocess.run(cmd, input=_reports(), capture_output=True, env=aws_env(), timeout=DEADLINE, check=False)
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "no reader" in lines[0], lines


def test_emf_fifo_with_a_reader_receives_the_events(tmp_path: Path) -> None:
    fifo = tmp_path / "emf.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader_fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO reads EOF until a writer comes: poll
    finished = threading.Event()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(reader_fd, 65536)
            except BlockingIOError:
                chunk = b""
            if chunk:
                got.append(chunk)
            elif finished.is_set():
                return
            else:
                time.sleep(0.02)

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    cmd = exporter_cmd("--output", "emf", "--emf-file", str(fifo))
    done = subprocess.run(cmd, input=_reports(), capture_output=True, env=aws_env(), timeout=DEADLINE, check=False)
    finished.set()
    t.join(DEADLINE)
    os.close(reader_fd)
    assert done.returncode == 0, done.stderr.decode()
    events = [orjson.loads(line) for line in b"".join(got).splitlines() if line.strip()]
    assert events and len(events) == _summary(done.stderr.decode())["emf_events"]


def test_a_blank_runtime_tag_is_never_a_blank_dimension(cloudwatch_url: str) -> None:
    """A workload's NEURON_PROCESS_TAG of spaces: CloudWatch refuses a whole request for one dimension value without
    a non-whitespace character (API_Dimension), so every request of the host would fail. The runtime goes by its pid,
    as one without a tag; moto accepts blank values, so the stored dimensions are checked."""
    lines = [orjson.loads(line) for line in _reports().splitlines()]
    for report in lines:
        for entry in report["neuron_runtime_data"]:
            entry["neuron_runtime_tag"] = "   "
    cmd = exporter_cmd("--endpoint-url", cloudwatch_url, "--namespace", "hostile_blank_tag")
    done = subprocess.run(cmd, input=encode_lines(lines), capture_output=True, env=aws_env(), timeout=DEADLINE)
    err = done.stderr.decode()
    assert done.returncode == 0 and _summary(err)["datums_sent"] > 0, err[-2000:]
    metrics = cw_client(cloudwatch_url).list_metrics(Namespace="hostile_blank_tag")["Metrics"]
    values = {(d["Name"], d["Value"]) for m in metrics for d in m["Dimensions"]}
    assert ("RuntimeTag", "1337") in values
    assert not [v for v in values if not v[1].strip()], values


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--cluster-name=   "], "--cluster-name"),
        (["--cluster-name=clusté"], "--cluster-name"),
        (["--cluster-name=c1", "--node-name=\t"], "--node-name"),
        (["--namespace", "AWS/Neuron"], "--namespace"),
    ],
    ids=["blank-cluster", "non-ascii-cluster", "blank-node", "aws-namespace"],
)
def test_a_dimension_or_namespace_cloudwatch_refuses_is_exit_2_with_one_line(args: list[str], named: str) -> None:
    cmd = exporter_cmd("--dimensions", "container-insights", "--cluster-name", "c1", *args)
    done = subprocess.run(cmd, input=b"", capture_output=True, env=aws_env(), timeout=DEADLINE)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "Value error" not in err and "Traceback" not in err, err
