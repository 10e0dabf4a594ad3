"""The command as a process: usage errors exit 2 with one line, missing credentials exit 2, EMF output from
real report lines with bad lines counted and skipped."""

from __future__ import annotations

import subprocess
from typing import Any

import orjson
import pytest

from tests.exporters.cloudwatch.conftest import aws_env, encode_lines, exporter_cmd


def run(args: list[str], stdin: bytes = b"", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(exporter_cmd(*args), input=stdin, capture_output=True, env=env or aws_env(), timeout=60)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--namespace", "AWS/Neuron"], "reserved for AWS"),
        (["--namespace", ""], "empty namespace"),
        (["--dimensions", "container-insights"], "--cluster-name"),
        (["--buffer-samples", "5"], "--buffer-samples"),
        (["--retry-base-delay", "5", "--retry-max-delay", "1"], "--retry-max-delay"),
    ],
)
def test_bad_options_exit_2_with_one_line(args: list[str], message: str) -> None:
    proc = run(args, env=aws_env(CLUSTER_NAME=""))
    assert proc.returncode == 2
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in lines[0]


def test_unknown_output_is_a_usage_error() -> None:
    assert run(["--output", "kinesis"]).returncode == 2


def test_no_credentials_exit_2_with_one_line() -> None:
    env = aws_env()
    del env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]
    proc = run(["--region", "us-east-1"], env=env)
    assert proc.returncode == 2
    (line,) = proc.stderr.decode().strip().splitlines()
    assert "no AWS credentials found" in line


def test_no_region_exit_2() -> None:
    env = aws_env()
    del env["AWS_DEFAULT_REGION"]
    env.pop("AWS_REGION", None)
    proc = run([], env=env)
    assert proc.returncode == 2 and "no AWS region" in proc.stderr.decode()


def test_unknown_profile_exit_2() -> None:
    proc = run(["--profile", "nope", "--region", "us-east-1"])
    assert proc.returncode == 2 and "nope" in proc.stderr.decode()


def summary(stderr: bytes) -> dict[str, Any]:
    (line,) = [x for x in stderr.decode().splitlines() if " summary " in x]
    return orjson.loads(line.split(" summary ", 1)[1])


def test_emf_to_stdout_with_bad_lines(trn1_report: dict[str, Any], wandb_reports: list[dict[str, Any]]) -> None:
    good = encode_lines([trn1_report, *wandb_reports])
    stdin = b"not json\n" + good + b"[1, 2]\n" + b'{"system_data": 5}\n'
    proc = run(["--output", "emf", "--namespace", "neuron_monitor"], stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    events = [orjson.loads(line) for line in proc.stdout.splitlines()]
    assert events and all(ev["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "neuron_monitor" for ev in events)
    names = {m["Name"] for ev in events for m in ev["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert {"NeuronCoreUtilization", "ExecutionLatencyP99", "HostMemoryUsed", "NeuronDeviceHwEccEventsTotal"} <= names
    s = summary(proc.stderr)
    assert s["reports"] == 4 and s["bad_lines"] == 3 and s["emf_events"] == len(events)


def test_emf_to_file_needs_no_credentials(tmp_path: Any, wandb_reports: list[dict[str, Any]]) -> None:
    env = aws_env()
    del env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]
    out = tmp_path / "emf.log"
    proc = run(["--output", "emf", "--emf-file", str(out)], stdin=encode_lines(wandb_reports), env=env)
    assert proc.returncode == 0 and proc.stdout == b""
    assert len(out.read_bytes().splitlines()) == summary(proc.stderr)["emf_events"] > 0
