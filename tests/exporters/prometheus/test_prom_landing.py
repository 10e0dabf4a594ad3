"""The landing page (issue 43, item 8): which host this is, the node's and each device's health verdict, the newest
report's age kept current by a script, and docs that the package serves itself; checked as HTML here and in a real
browser (headless Chromium) below."""

from __future__ import annotations

import base64
import hashlib
import http.client
import re
import shutil
import subprocess
import tempfile
from typing import Any

import pytest

from neuron_monitor.exporters.prometheus.app import ExporterApp
from neuron_monitor.exporters.prometheus.collector import ExporterCollector
from neuron_monitor.exporters.prometheus.landing import CSP, SCRIPT, STYLE, landing_page
from neuron_monitor.exporters.prometheus.server import Request, Response
from neuron_monitor.exporters.prometheus.state import ExporterState
from tests.exporters.prometheus.prom_process import ExporterProcess
from tests.exporters.prometheus.prom_reports import runtime, trn2_report

DEADLINE = 60.0


def health_report(hostile: str = "", node_state: str = "unhealthy", **kw: Any) -> dict[str, Any]:
    """A trn2 report whose health group says device 3 is unhealthy (``hostile`` appended to report strings)."""
    report = trn2_report([runtime(1000, "job-0", [0, 1])], **kw)
    devices = []
    for d in range(16):
        unhealthy = d == 3
        reasons = (
            [{"rule": "ecc_uncorrected", "severity": "critical", "detail": "hbm", "message": f"HBM error{hostile}"}]
            if unhealthy
            else []
        )
        devices.append(
            {
                "neuron_device_index": d,
                "health": {"state": "unhealthy" if unhealthy else "healthy", "since": 1.7e9, "reasons": reasons},
            }
        )
    report["system_data"]["neuron_device_health"] = {
        "period": 1.0,
        "error": "",
        "neuron_devices": devices,
        "node": {"state": node_state, "since": 1.7e9},
    }
    report["instance_info"].update({"instance_id": "i-0abc" + hostile, "instance_type": "trn2.48xlarge"})
    return report


def _get(app: ExporterApp, path: str) -> Response:
    response = app(Request("GET", path, "HTTP/1.1", {}))
    assert isinstance(response, Response)
    return response


def _page(report: dict[str, Any]) -> str:
    state = ExporterState()
    assert state.apply(report)
    return landing_page(ExporterCollector(state), dashboard=True)


def test_the_page_shows_the_host_and_every_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODE_NAME", "ip-10-0-0-1.ec2.internal")
    page = _page(health_report())
    assert '<span id="instance-id">i-0abc</span>' in page and '<span id="instance-type">trn2.48xlarge</span>' in page
    assert 'node <span id="node-name">ip-10-0-0-1.ec2.internal</span>' in page
    assert '<p id="verdict" class="unhealthy">Node health: unhealthy</p>' in page
    rows = re.findall(r'<tr class="device" data-device="(\d+)"><td>\d+</td><td><span class="(\w+)">', page)
    assert rows == [(str(d), "unhealthy" if d == 3 else "healthy") for d in range(16)]
    assert "ecc_uncorrected: HBM error" in page
    assert re.search(r'<span id="report-age" data-age="[\d.]+" data-window="[\d.]+">', page)
    assert '<a id="docs" href="docs/prometheus.md">' in page


def test_without_verdicts_the_page_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    page = _page(trn2_report([runtime(1000, "job-0", [0])]))
    assert "Node health: unknown (the reports carry no health verdict" in page
    assert 'host <span id="node-name">' in page


def test_every_string_from_the_report_is_escaped() -> None:
    hostile = "<script>alert(1)</script>\u202e\x1b[2J"
    page = _page(health_report(hostile))
    assert "<script>alert(1)" not in page and "\u202e" not in page and "\x1b" not in page
    assert page.count("<script>") == 1  # the page's own
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_policy_allows_exactly_the_inline_style_and_script() -> None:
    def digest(text: str) -> str:
        return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()

    page = _page(health_report())
    (script,) = re.findall(r"<script>(.*?)</script>", page, re.S)
    (style,) = re.findall(r"<style>(.*?)</style>", page, re.S)
    assert script == SCRIPT and style == STYLE
    assert f"script-src '{digest(script)}'" in CSP and f"style-src '{digest(style)}'" in CSP
    assert CSP.startswith("default-src 'none';")
    app = ExporterApp(ExporterCollector(ExporterState()))
    response = app(Request("GET", "/", "HTTP/1.1", {}))
    assert (
        not isinstance(response, type(None)) and getattr(response, "headers", {}).get("Content-Security-Policy") == CSP
    )


def test_the_docs_are_served_from_the_package() -> None:
    app = ExporterApp(ExporterCollector(ExporterState()))
    index = _get(app, "/docs/")
    assert index.status == 200 and isinstance(index.body, bytes) and b'href="prometheus.md"' in index.body
    doc = _get(app, "/docs/prometheus.md")
    assert doc.status == 200 and isinstance(doc.body, bytes) and doc.body.startswith(b"#")
    assert doc.content_type == "text/plain; charset=utf-8"
    for bad in ("/docs/../README.md", "/docs/%2e%2e/setup.py", "/docs/nope.md", "/docs/prometheus.md/"):
        assert _get(app, bad).status == 404, bad


CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def _chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        pytest.skip("chromium is not installed (make test-tools installs it)")
    return found


def _dump_dom(url: str, virtual_ms: int) -> str:
    """The page's DOM after ``virtual_ms`` of virtual time (timers run, no wall-clock wait), as Chromium has it."""
    with tempfile.TemporaryDirectory(prefix="nm-chromium-") as profile:
        done = subprocess.run(
            [
                _chromium(),
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                f"--virtual-time-budget={virtual_ms}",
                "--dump-dom",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=DEADLINE * 2,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.e2e
def test_a_real_browser_runs_the_page_and_the_age_moves_on_without_a_reload() -> None:
    _chromium()
    exporter = ExporterProcess()
    try:
        exporter.send(health_report())
        exporter.wait_for("/", lambda status, body: 'id="report-age"' in body, timeout=DEADLINE)
        dom = _dump_dom(f"http://127.0.0.1:{exporter.port}/", virtual_ms=5000)
        conn = http.client.HTTPConnection("127.0.0.1", exporter.port, timeout=DEADLINE)
        conn.request("GET", "/docs/prometheus.md")
        docs = conn.getresponse()
        assert docs.status == 200 and docs.read().startswith(b"#")
        conn.close()
    finally:
        exporter.stop()
    assert 'id="verdict"' in dom and "Node health: unhealthy" in dom
    assert len(re.findall(r'<tr class="device" data-device="\d+">', dom)) == 16
    assert '<span id="instance-id">i-0abc</span>' in dom and 'id="node-name"' in dom
    age = re.search(
        r'<span id="report-age" data-age="([\d.]+)" data-window="[\d.]+" data-updates="(\d+)">([\d.]+) s ago', dom
    )
    assert age is not None, dom[:3000]  # the script ran (the policy let it) and rewrote the age
    rendered, updates, shown = float(age.group(1)), int(age.group(2)), float(age.group(3))
    assert updates >= 3 and shown >= rendered + 3.0  # five virtual seconds later, on the same page
    assert '<a id="docs" href="docs/prometheus.md">' in dom
