"""TLS certificate rotation under load: new connections get the new certificate, no request fails meanwhile."""

from __future__ import annotations

import http.client
import os
import ssl
import threading
import time
from pathlib import Path

import pytest

from tests.exporters.prometheus.prom_process import ExporterProcess, make_certificate
from tests.exporters.prometheus.prom_reports import runtime, trn2_report

DEADLINE = 60.0


def _served_certificate(port: int, context: ssl.SSLContext) -> bytes:
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=DEADLINE)
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200
        assert conn.sock is not None
        return conn.sock.getpeercert(binary_form=True)  # type: ignore[union-attr]
    finally:
        conn.close()


@pytest.mark.e2e
@pytest.mark.parametrize("mode", ["cert-file", "web-config"])
def test_certificate_rotation_under_load(tmp_path: Path, mode: str) -> None:
    cert, key = make_certificate(tmp_path, "server")
    new_cert, new_key = make_certificate(tmp_path, "next")
    old_der = ssl.PEM_cert_to_DER_cert(cert.read_text())
    new_der = ssl.PEM_cert_to_DER_cert(new_cert.read_text())
    if mode == "cert-file":
        args = ["--cert-file", str(cert), "--key-file", str(key)]
    else:
        (tmp_path / "web.yml").write_text(f"tls_server_config:\n  cert_file: {cert.name}\n  key_file: {key.name}\n")
        args = ["--web-config", str(tmp_path / "web.yml")]
    context = ssl.create_default_context(cafile=str(cert))
    context.load_verify_locations(cafile=str(new_cert))
    exporter = ExporterProcess(*args)
    stop = threading.Event()
    seen: list[bytes] = []
    errors: list[str] = []

    def scraper() -> None:
        while not stop.is_set():
            try:
                seen.append(_served_certificate(exporter.port, context))
            except (OSError, AssertionError) as e:
                errors.append(repr(e))

    try:
        exporter.send(trn2_report([runtime(1, "a", [0, 1])], vcpus=4, devices=1))
        assert _served_certificate(exporter.port, context) == old_der
        threads = [threading.Thread(target=scraper) for _ in range(4)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + DEADLINE
        while len(seen) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.replace(new_cert, cert)  # the certificate first, the key a moment later: a mismatched pair in between
        time.sleep(0.5)
        os.replace(new_key, key)
        while time.monotonic() < deadline and (not seen or seen[-1] != new_der):
            time.sleep(0.05)
        n = len(seen)
        while len(seen) < n + 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join(DEADLINE)
        assert errors == []
        assert seen[-1] == new_der and old_der in seen
        assert set(seen) == {old_der, new_der}
    finally:
        stop.set()
        exporter.stop()
