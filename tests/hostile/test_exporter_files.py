"""Every file the Prometheus exporter opens (certificate, key, client CA, web config), at start and on reload,
goes through the input discipline: regular file, opened without blocking, size cap.

Before (issue 32): a TLS key replaced by a FIFO wedged the exporter (its one thread blocked in open(); HTTPS and
/healthz stopped for good, also after the key was restored), and `--key-file FIFO` hung at start. After: a bad
file is one error line, exit 2 at start; on reload the previous pair stays in use and a good pair is picked up
again later.
"""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import time
from pathlib import Path

import pytest

from tests.exporters.prometheus.prom_process import ExporterProcess, exporter_cmd, make_certificate
from tests.exporters.prometheus.prom_reports import runtime, trn2_report

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
DEADLINE = 60.0


def bad_file(tmp_path: Path, kind: str) -> str:
    """A path that must not be opened as a certificate or key: a FIFO with no writer, a device, a huge file, a
    directory."""
    if kind == "fifo":
        path = tmp_path / "key.fifo"
        os.mkfifo(path)
        return str(path)
    if kind == "device":
        return "/dev/zero"
    if kind == "huge":
        path = tmp_path / "huge.pem"
        with open(path, "wb") as f:
            f.truncate(3 * 1024 * 1024)
        return str(path)
    return str(tmp_path)


def start_failure(*args: str) -> tuple[int, str]:
    proc = subprocess.run(
        exporter_cmd("--bind", "127.0.0.1", "--port", "0", *args), capture_output=True, timeout=DEADLINE
    )
    return proc.returncode, proc.stderr.decode()


@pytest.mark.e2e
@pytest.mark.parametrize("kind", ["fifo", "device", "huge", "directory"])
@pytest.mark.parametrize("which", ["key", "cert"])
def test_a_bad_key_or_certificate_at_start_is_exit_2(tmp_path: Path, kind: str, which: str) -> None:
    cert, key = make_certificate(tmp_path)
    bad = bad_file(tmp_path, kind)
    args = ["--cert-file", bad if which == "cert" else str(cert), "--key-file", bad if which == "key" else str(key)]
    code, err = start_failure(*args)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert bad in lines[0] or os.path.basename(bad) in lines[0]


@pytest.mark.e2e
@pytest.mark.parametrize("kind", ["fifo", "device", "huge"])
def test_a_bad_client_ca_in_the_web_config_is_exit_2(tmp_path: Path, kind: str) -> None:
    cert, key = make_certificate(tmp_path)
    bad = bad_file(tmp_path, kind)
    web = tmp_path / "web.yml"
    web.write_text(
        f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"
        f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {bad}\n"
    )
    code, err = start_failure("--web-config", str(web))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def served_der(port: int, context: ssl.SSLContext) -> bytes:
    import http.client

    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=DEADLINE)
    try:
        conn.request("GET", "/healthz")
        resp = conn.getresponse()
        resp.read()
        assert resp.status in (200, 503)
        assert conn.sock is not None
        return conn.sock.getpeercert(binary_form=True)  # type: ignore[union-attr]
    finally:
        conn.close()


def wait_served(port: int, context: ssl.SSLContext, want: bytes) -> None:
    deadline = time.monotonic() + DEADLINE
    got = b""
    while time.monotonic() < deadline:
        got = served_der(port, context)
        if got == want:
            return
        time.sleep(0.1)
    raise AssertionError("the expected certificate was never served")


@pytest.mark.e2e
@pytest.mark.parametrize("kind", ["fifo", "device", "huge"])
def test_a_key_replaced_by_a_bad_file_keeps_the_old_pair_then_a_good_one_loads(tmp_path: Path, kind: str) -> None:
    cert, key = make_certificate(tmp_path, "server")
    new_cert, new_key = make_certificate(tmp_path, "next")
    old_der = ssl.PEM_cert_to_DER_cert(cert.read_text())
    new_der = ssl.PEM_cert_to_DER_cert(new_cert.read_text())
    context = ssl.create_default_context(cafile=str(cert))
    context.load_verify_locations(cafile=str(new_cert))
    exporter = ExporterProcess("--cert-file", str(cert), "--key-file", str(key))
    try:
        exporter.send(trn2_report([runtime(1, "a", [0, 1])], vcpus=4, devices=1))
        assert served_der(exporter.port, context) == old_der
        key.unlink()
        if kind == "fifo":
            os.mkfifo(key)
        elif kind == "device":
            os.symlink("/dev/zero", key)
        else:
            with open(key, "wb") as f:
                f.truncate(3 * 1024 * 1024)
        # several reload checks pass (every 2 s): HTTPS and /healthz keep answering with the old pair
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            assert served_der(exporter.port, context) == old_der
            time.sleep(0.2)
        key.unlink()
        shutil.copy(new_key, key)
        os.replace(new_cert, cert)
        wait_served(exporter.port, context, new_der)  # restored: the loop was never wedged
    finally:
        exporter.stop()
    assert exporter.proc.stderr is not None
