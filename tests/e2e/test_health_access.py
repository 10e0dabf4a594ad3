"""``neuron-monitor-health --url`` against an exporter that serves TLS and asks for basic auth (its --web-config),
both real processes: the right CA, client certificate and password give the verdict; a missing or wrong one is
exit 2 with one line saying which; the password never appears in anything the command prints."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from tests.conftest import REPO
from tests.exporters.prometheus.prom_process import ExporterProcess, client_context, make_certificate
from tests.exporters.prometheus.prom_reports import runtime, trn2_report
from tests.exporters.prometheus.test_prom_dashboard import DEVICE_HEALTH

pytestmark = pytest.mark.e2e
PASSWORD = "n0t-in-any-log"


def health_cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "neuron_monitor.health.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ExporterProcess, Path]]:
    """An exporter with TLS, a required client certificate and basic auth, serving one unhealthy device."""
    d = tmp_path_factory.mktemp("access")
    cert, key = make_certificate(d)
    client_cert, client_key = make_certificate(d, "client")
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=6)).decode()
    (d / "web.yml").write_text(
        f"tls_server_config:\n  cert_file: {cert.name}\n  key_file: {key.name}\n"
        f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {client_cert.name}\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )
    (d / "password").write_text(PASSWORD + "\n")
    (d / "wrong").write_text("guess\n")
    exporter = ExporterProcess("--web-config", str(d / "web.yml"))
    report = trn2_report([runtime(1, "a", [0])], vcpus=2, devices=1)
    report["system_data"]["neuron_device_health"] = copy.deepcopy(DEVICE_HEALTH)
    exporter.send(report)
    tls = client_context(cert)
    tls.load_cert_chain(str(client_cert), str(client_key))
    exporter.wait_for(
        "/metrics",
        lambda s, b: s == 200 and "neuron_device_health_state" in b,
        tls=tls,
        auth=("prometheus", PASSWORD),
        timeout=60,
    )
    try:
        yield exporter, d
    finally:
        exporter.stop()


def _tls_args(d: Path) -> list[str]:
    return [
        "--ca-file",
        str(d / "server.crt"),
        "--cert-file",
        str(d / "client.crt"),
        "--key-file",
        str(d / "client.key"),
    ]


def test_the_verdict_through_tls_and_basic_auth(served: tuple[ExporterProcess, Path]) -> None:
    exporter, d = served
    url = f"https://127.0.0.1:{exporter.port}"
    done = health_cli("--url", url, *_tls_args(d), "--user", "prometheus", "--password-file", str(d / "password"))
    assert done.returncode == 1, done.stdout + done.stderr  # the served device is unhealthy
    assert done.stdout.startswith("unhealthy:") and "ecc_uncorrected" in done.stdout
    assert PASSWORD not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("drop", "password", "expected"),
    [
        ("--user", "password", "answered 401 (it asks for --user/--password-file)"),
        (None, "wrong", "answered 401 (wrong --user/--password-file)"),
        ("--ca-file", "password", "CERTIFICATE_VERIFY_FAILED"),
        ("--cert-file", "password", ""),  # the server refuses the handshake; exit 2 is what matters
    ],
)
def test_a_missing_or_wrong_credential_is_unknown_with_the_reason(
    served: tuple[ExporterProcess, Path], drop: str | None, password: str, expected: str
) -> None:
    exporter, d = served
    args = [*_tls_args(d), "--user", "prometheus", "--password-file", str(d / password)]
    if drop is not None:  # an option and its partner
        partner = {"--user": "--password-file", "--ca-file": None, "--cert-file": "--key-file"}[drop]
        for option in (drop, partner):
            if option is not None:
                i = args.index(option)
                del args[i : i + 2]
    done = health_cli("--url", f"https://127.0.0.1:{exporter.port}", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.startswith("unknown:") and expected in done.stdout, done.stdout
    assert PASSWORD not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--url", "http://127.0.0.1:9", "--user", "u", "--password-file", "P"], "--user needs an https URL"),
        (["--url", "https://127.0.0.1:9", "--user", "u"], "--user and --password-file go together"),
        (["--url", "https://127.0.0.1:9", "--cert-file", "C"], "--cert-file and --key-file go together"),
        (["--ca-file", "C"], "go with --url"),
        (
            ["--url", "https://127.0.0.1:9", "--ca-file", "/nonexistent/ca.pem"],
            "--ca-file '/nonexistent/ca.pem': no such",
        ),
        (["--url", "https://127.0.0.1:9", "--user", "a:b", "--password-file", "P"], "holds a ':'"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(tmp_path: Path, args: list[str], expected: str) -> None:
    (tmp_path / "P").write_text(PASSWORD)
    (tmp_path / "C").write_text("not a certificate")
    args = [str(tmp_path / a) if a in ("P", "C") else a for a in args]
    done = health_cli(*args)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("neuron-monitor-health: ") and expected in lines[0], done.stderr
    assert "Traceback" not in done.stderr and PASSWORD not in done.stdout + done.stderr
