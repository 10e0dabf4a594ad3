"""Every neuron-monitor-otlp command of docs/otlp.md runs: against a local receiver listening on the same path
(the host part of the URL replaced by the receiver's), delivering a report there; --sigv4 with fixed
credentials."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import urllib.parse
from pathlib import Path

import orjson
import pytest

from tests.exporters.otlp.otlp_helpers import trn2
from tests.exporters.otlp.receiver import Receiver

DOC = Path(__file__).resolve().parents[3] / "docs" / "otlp.md"
COMMANDS = [
    line.strip() for line in DOC.read_text().splitlines() if line.strip().startswith("neuron-monitor-otlp --endpoint")
]


def test_the_doc_has_one_command_per_receiver() -> None:
    assert len(COMMANDS) >= 5  # Prometheus, Mimir, VictoriaMetrics, CloudWatch, the CloudWatch agent or ADOT


@pytest.mark.parametrize("command", COMMANDS)
def test_doc_command_delivers_on_its_path(command: str) -> None:
    args = shlex.split(command)[1:]
    at = args.index("--endpoint") + 1
    documented = urllib.parse.urlsplit(args[at])
    receiver = Receiver()
    try:
        args[at] = urllib.parse.urlunsplit(documented._replace(scheme="http", netloc=f"127.0.0.1:{receiver.port}"))
        env = {
            "PATH": "/usr/bin:/bin",
            "AWS_ACCESS_KEY_ID": "AKIDEXAMPLEKEYID0000",
            "AWS_SECRET_ACCESS_KEY": "secret-example-key-0000",
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        proc = subprocess.run(
            [sys.executable, "-m", "neuron_monitor.exporters.otlp.cli", *args],
            input=orjson.dumps(trn2(0, runtimes=2)) + b"\n",
            capture_output=True,
            env=env,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        got, closing = receiver.received  # the report, then the closing push of the exporter's own metrics
    finally:
        receiver.stop()
    assert got.path == closing.path == documented.path and got.request is not None
    if "--sigv4" in args:
        assert re.match(
            r"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLEKEYID0000/\d{8}/us-west-2/monitoring/",
            got.headers["Authorization"],
        )
    for i, arg in enumerate(args):
        if arg == "--header":
            name, _, value = args[i + 1].partition("=")
            assert got.headers[name] == value
