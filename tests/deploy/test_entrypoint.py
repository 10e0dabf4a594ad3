"""The image entrypoint (deploy/image/entrypoint.sh -> neuron_monitor.daemon.entrypoint) run for real: AWS's command
line on a simulated trn2u.48xlarge, scraped over HTTPS with a CA; its exit on a signal, on a dying child, on bad
flags."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from neuron_monitor.sim.temporary import TemporarySimulator
from tests.deploy.cloudwatch_agent import make_ca_and_server_cert, scrape
from tests.deploy.entrypoint_process import ADDON_CONFIG, ENTRYPOINT, Entrypoint

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


def pipeline_pids(parent: int) -> list[int]:
    """The entrypoint's children (daemon and exporter), from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                out.append(int(entry))
    return out


@pytest.fixture(scope="module")
def sim() -> Iterator[TemporarySimulator]:
    with TemporarySimulator("trn2u.48xlarge", runtimes=2, seed=5) as s:
        yield s


def test_awss_command_line_serves_https_checked_against_the_ca(tmp_path: Path, sim: TemporarySimulator) -> None:
    ca, cert, key = make_ca_and_server_cert(tmp_path / "tls")
    conf = tmp_path / "monitor.json"
    conf.write_bytes(orjson.dumps(ADDON_CONFIG))
    args = ["--cert-file", str(cert), "--key-file", str(key), "--port", "0", "--neuron-monitor-config", str(conf)]
    ep = Entrypoint(args, root=sim.root)
    try:
        port = ep.port()
        deadline = time.monotonic() + 60
        body = ""
        while time.monotonic() < deadline:
            status, _, body = scrape(port, ca)
            if status == 200 and "neuroncore_utilization_ratio{" in body:
                break
            time.sleep(0.2)
        assert "neuroncore_utilization_ratio{" in body, body[-2000:]
        assert 'ultraserver_id="u-9ff5434815c8bd80"' in body  # the simulated UltraServer reached the exporter
        assert "neuron_device_index" not in re.search(r"neuroncore_utilization_ratio\{[^}]*\}", body).group(0)
        status, _, health = scrape(port, ca, path="/healthz")
        assert status == 200, health
        children = pipeline_pids(ep.proc.pid)
        assert len(children) == 2
    finally:
        code = ep.stop()
    assert code == 0, "".join(ep.log)[-2000:]
    for pid in children:  # both processes are gone, not orphaned
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_plain_http_and_a_wrong_name_are_refused_by_the_agents_check(tmp_path: Path, sim: TemporarySimulator) -> None:
    import ssl

    ca, cert, key = make_ca_and_server_cert(tmp_path / "tls")
    other_ca, _, _ = make_ca_and_server_cert(tmp_path / "other")
    ep = Entrypoint(["--cert-file", str(cert), "--key-file", str(key), "--port", "0"], root=sim.root)
    try:
        port = ep.port()
        with pytest.raises(ssl.SSLCertVerificationError):
            scrape(port, other_ca)  # a certificate the agent's CA did not sign
        with pytest.raises(ssl.SSLCertVerificationError):
            scrape(port, ca, server_name="some-other-service")
        assert scrape(port, ca)[0] in (200, 503)  # the right CA and name: served (data may still be on its way)
    finally:
        assert ep.stop() == 0


def test_a_bad_configuration_stops_the_container_with_the_daemons_message(tmp_path: Path) -> None:
    conf = tmp_path / "monitor.json"
    conf.write_text('{"period": "soon"}')
    ep = Entrypoint(["--port", "0", "--neuron-monitor-config", str(conf)], root=tmp_path)
    code = ep.proc.wait(60)
    ep._reader.join(10)
    log = "".join(ep.log)
    assert code == 2, log
    assert str(conf) in log and "Traceback" not in log
    assert "neuron-monitor exited with code 2" in log


@pytest.mark.parametrize(
    "args",
    [["--port", "70000"], ["--cert-file", "/x.crt"], ["--neuron-monitor-conf"], ["--core-labels", "gpu"]],
)
def test_bad_flags_exit_2_with_one_line(args: list[str]) -> None:
    run = subprocess.run(
        [str(ENTRYPOINT), *args],
        env=dict(os.environ, NEURON_MONITOR_PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_an_exporter_that_cannot_listen_stops_the_daemon_too(tmp_path: Path, sim: TemporarySimulator) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        ep = Entrypoint(["--port", str(port)], root=sim.root)
        code = ep.proc.wait(60)
        ep._reader.join(10)
    log = "".join(ep.log)
    assert code == 1, log
    assert "cannot listen" in log and "neuron-monitor-prometheus exited with code 1" in log
