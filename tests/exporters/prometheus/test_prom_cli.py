"""The exporter as a process: usage errors, stdin robustness and EOF, TLS and basic auth, signals."""

from __future__ import annotations

import asyncio
import signal
import ssl
import subprocess
import sys
from pathlib import Path

import bcrypt
import pytest

from neuron_monitor.exporters.prometheus import cli
from neuron_monitor.exporters.prometheus.ingest import READ_EVERY, StdinIngest
from neuron_monitor.util.early_signals import SIGNALS
from tests.exporters.prometheus.prom_helpers import one, parse, select
from tests.exporters.prometheus.prom_process import ExporterProcess, client_context, exporter_cmd, make_certificate
from tests.exporters.prometheus.prom_reports import runtime, trn2_report

REPO = Path(__file__).resolve().parents[3]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(exporter_cmd(*args), capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(
    "args",
    [
        ["--port", "70000"],
        ["--key-file", "k.pem"],
        ["--stale-periods", "0"],
        ["--stale-periods", "nan"],
        ["--stale-periods", "inf"],
        ["--stale-periods", "-3"],
        ["--stale-floor", "nan"],
        ["--stale-floor", "0"],
        ["--max-label-length", "3"],
        ["--max-series-per-report", "10"],
        ["--max-series-per-report", "many"],
        ["--no-such-flag"],
    ],
)
def test_bad_usage_exits_2_with_one_line(args: list[str]) -> None:
    done = _run(*args)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read web config"),
        ("tls_server_config: [unclosed", "not valid YAML"),
        ("basic_auth_users: {alice: plaintext}\ntls_server_config: {cert_file: a, key_file: b}", "not a bcrypt hash"),
        ("tls_server_config: {cert_file: a, key_file: b, cipher_suites: [x]}", "unsupported setting"),
        ("basic_auth_users: {}", "no tls_server_config"),
        (  # one user twice: which hash would hold? exporter-toolkit's strict parser refuses it, and so do we
            "tls_server_config: {cert_file: a, key_file: b}\nbasic_auth_users:\n  alice: x\n  bob: y\n  alice: z\n",
            "not valid YAML: duplicate key 'alice' on line 5",
        ),
        ("tls_server_config: {cert_file: missing.crt, key_file: missing.key}", "cannot load TLS certificate"),
    ],
)
def test_bad_web_config_exits_2_with_one_line(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "web.yml"
    if content is not None:
        path.write_text(content)
    done = _run("--web-config", str(path))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr


def test_both_console_scripts_point_at_main() -> None:
    tomllib = pytest.importorskip("tomllib")
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    target = "neuron_monitor.launch:prometheus"  # signals blocked first, then the exporter's main
    assert scripts["neuron-monitor-prometheus"] == target
    assert scripts["neuron-monitor-prometheus.py"] == target
    launch = (REPO / "neuron_monitor" / "launch.py").read_text()
    assert "def prometheus() -> int:\n    from neuron_monitor.exporters.prometheus.cli import main\n" in launch


@pytest.mark.e2e
def test_stdin_bad_lines_are_counted_and_eof_fails_health() -> None:
    exporter = ExporterProcess("--max-line-bytes", "200000")
    try:
        good = trn2_report([runtime(1, "a", [0, 1], completed=3)], vcpus=4, devices=1)
        bad_types = trn2_report([runtime(1, "a", [0, 1])], vcpus=4, devices=1)
        bad_types["system_data"]["neuron_hw_counters"]["neuron_devices"][0]["mem_ecc_corrected"] = "lots"
        exporter.send(
            good,
            b'{"neuron_runtime_data": [',  # truncated
            b"not json at all",
            b"[1, 2, 3]",
            b'{"system_data": 5}',
            b'{"x": "' + b"y" * 300_000 + b'"}',  # giant
            bad_types,
            good,
        )
        body = exporter.wait_for(  # the counts, and the second good report published (a publication follows them)
            "/metrics",
            lambda s, b: (
                'reason="malformed_report"} 1.0' in b
                and "reports_total 2.0" in b
                and set(select(parse(b), "execution_status_total", runtime_tag="a", status_type="completed").values())
                == {6.0}
            ),
        )
        series = parse(body)
        assert one(series, "neuron_exporter_bad_lines_total", reason="invalid") == 4
        assert one(series, "neuron_exporter_bad_lines_total", reason="oversize") == 1
        assert one(series, "execution_status_total", runtime_tag="a", status_type="completed") == 6
        assert exporter.get("/healthz")[0] == 200
        status, _, landing = exporter.get("/")
        assert status == 200 and 'href="metrics"' in landing
        exporter.close_stdin()
        exporter.wait_for("/healthz", lambda s, b: s == 503 and "stdin closed" in b)
        assert exporter.proc.poll() is None  # keeps serving for Prometheus to see up == 0
        series = parse(exporter.get("/metrics")[2])
        assert one(series, "neuron_exporter_up") == 0 and one(series, "neuron_exporter_input_closed") == 1
        assert exporter.get("/nowhere")[0] == 404
    finally:
        assert exporter.stop() == 0  # SIGTERM is a clean exit
    assert not [line for line in exporter.log if "Traceback" in line]


@pytest.mark.e2e
def test_exit_on_eof() -> None:
    exporter = ExporterProcess("--exit-on-eof")
    exporter.send(trn2_report([runtime(1, "a", [0])], vcpus=2, devices=1))
    exporter.close_stdin()
    assert exporter.proc.wait(10) == 1
    exporter.stop()


@pytest.mark.e2e
def test_tls_and_basic_auth_from_web_config(tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path)
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=6)).decode()
    (tmp_path / "web.yml").write_text(
        f"tls_server_config:\n  cert_file: {cert.name}\n  key_file: {key.name}\n"
        f"http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )
    exporter = ExporterProcess("--web-config", str(tmp_path / "web.yml"))
    tls = client_context(cert)
    try:
        exporter.send(trn2_report([runtime(1, "a", [0])], vcpus=2, devices=1))
        status, headers, _ = exporter.get("/metrics", tls=tls)
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
        assert exporter.get("/metrics", tls=tls, auth=("prometheus", "wrong"))[0] == 401
        assert exporter.get("/metrics", tls=tls, auth=("nobody", "s3cret"))[0] == 401
        assert exporter.get("/", tls=tls)[0] == 401
        body = exporter.wait_for(
            "/metrics",
            lambda s, b: s == 200 and "neuroncore_utilization_ratio" in b,
            tls=tls,
            auth=("prometheus", "s3cret"),
        )
        assert one(parse(body), "neuron_exporter_reports_total") == 1
        status, headers, _ = exporter.get("/healthz", tls=tls)  # probes need no credentials
        assert status == 200 and headers["X-Content-Type-Options"] == "nosniff"
        assert exporter.get("/livez", tls=tls)[:1] == (200,) and exporter.get("/readyz", tls=tls)[0] == 200
        with pytest.raises((ConnectionError, OSError)):  # no plain HTTP on a TLS port
            status, _, _ = exporter.get("/healthz")
            assert status >= 400
            raise ConnectionError("plain HTTP got an HTTP error response")
        with pytest.raises(ssl.SSLError):  # a client that does not trust the certificate
            exporter.get("/healthz", tls=ssl.create_default_context())
    finally:
        exporter.stop()


@pytest.mark.e2e
def test_aws_style_cert_and_key_flags(tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path)
    exporter = ExporterProcess("--cert-file", str(cert), "--key-file", str(key), "--enable-k8s-info")
    try:
        exporter.send(trn2_report([runtime(1, "a", [0])], vcpus=2, devices=1))
        body = exporter.wait_for("/metrics", lambda s, b: "neuroncore_utilization_ratio" in b, tls=client_context(cert))
        # --enable-k8s-info: the pod labels are there (empty) even without neuron_k8s_info in the reports
        series = parse(body)
        assert one(series, "neuroncore_utilization_ratio", runtime_tag="a", pod_name="", namespace="") > 0
    finally:
        exporter.stop()


@pytest.mark.e2e
def test_sigint_exits_cleanly() -> None:
    exporter = ExporterProcess()
    exporter.proc.send_signal(signal.SIGINT)
    assert exporter.proc.wait(10) == 0
    exporter.stop()
    assert sys.executable


@pytest.mark.parametrize(("floor", "every"), [("0.5", 0.125), ("2", 0.5), ("10", READ_EVERY)])
def test_stdin_ticks_come_within_a_quarter_of_the_stale_floor(
    monkeypatch: pytest.MonkeyPatch, floor: str, every: float
) -> None:
    """With a short ``--stale-floor`` the staleness window can be shorter than the ticks' usual second: a report
    that waited for its tick would be counted when the one before had already gone stale, and up would flap. The
    exporter's ticks are therefore at most a quarter of the floor (the window is never shorter than the floor)."""
    seen: list[float] = []
    loops: list[asyncio.AbstractEventLoop] = []

    class Probe(StdinIngest):
        def attach(self, loop: asyncio.AbstractEventLoop) -> None:
            seen.append(self.read_every)
            loops.append(loop)
            raise SystemExit("SIGTERM")  # stop as a signal would, before anything is read

    monkeypatch.setattr(cli, "StdinIngest", Probe)
    monkeypatch.setattr(cli, "setup_logging", lambda prog, verbose: None)  # leave this process's logging alone
    monkeypatch.setattr(cli, "quiet_gc", lambda: None)  # and its garbage collector
    handlers = {signum: signal.getsignal(signum) for signum in SIGNALS}
    try:
        assert cli._main(["--bind", "127.0.0.1", "--port", "0", "--stale-floor", floor]) == 0
    finally:  # this process's signal handlers and event loop as they were (the exporter's are its loop's)
        for loop in loops:
            loop.close()
        asyncio.set_event_loop(None)
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert seen == [every]
