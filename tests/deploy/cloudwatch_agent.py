"""How the CloudWatch agent (Container Insights) scrapes neuron-monitor, written down from its public sources so
tests can scrape our exporter the same way; and a CA plus a server certificate like the add-on's.

Scrape settings (amazon-contributing/opentelemetry-collector-contrib,
``receiver/awscontainerinsightreceiver/internal/neuron/neuron_monitor_scraper_config.go``): HTTPS on ``/metrics``,
the server certificate checked against the add-on's CA, the Service ``neuron-monitor-service`` found by the label
``k8s-app=neuron-monitor-service``, and only series whose name matches ``neuron.*|system_.*|execution_.*|
hardware_ecc_.*`` kept (a Prometheus relabel regex: anchored at both ends). The agent's Prometheus scraper asks
for OpenMetrics first, which is why its rename map knows the hardware info family as ``neuron_hardware``.

What the agent then needs (amazon-cloudwatch-agent ``translator/translate/otel/processor/
metricstransformprocessor/translator.go`` ``renameMapForNeuronMonitor``; the relabels of the scraper config;
``pod_attribute_decorator.go`` next to the scraper config) is listed below.
"""

from __future__ import annotations

import re
import socket
import ssl
import subprocess
from pathlib import Path

from prometheus_client.openmetrics.parser import text_string_to_metric_families

SERVICE_NAME = "neuron-monitor-service"
SERVICE_LABEL = ("k8s-app", "neuron-monitor-service")
NAMESPACE = "amazon-cloudwatch"
KEEP = re.compile(r"neuron.*|system_.*|execution_.*|hardware_ecc_.*")
# what a Prometheus scraper sends (OpenMetrics preferred)
ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)

# renameMapForNeuronMonitor: the family names it renames (counters by their sample name, as the agent sees them)
RENAMED_SAMPLES: tuple[str, ...] = (
    "neuroncore_utilization_ratio",
    "neuroncore_memory_usage_constants",
    "neuroncore_memory_usage_model_code",
    "neuroncore_memory_usage_model_shared_scratchpad",
    "neuroncore_memory_usage_runtime_memory",
    "neuroncore_memory_usage_tensors",
    "execution_errors_total",
    "execution_status_total",
    "neuron_runtime_memory_used_bytes",
    "hardware_ecc_events_total",
    "execution_latency_seconds",
    "neuron_hardware_info",  # the OpenMetrics info family "neuron_hardware"
)
# in the rename map too, but its name does not pass the scrape filter: the agent takes the instance labels from
# the other series (they carry them), so it must be served, not kept
RENAMED_BUT_FILTERED: tuple[str, ...] = ("instance_info",)
# labels the agent reads, by sample name (plus the instance labels on every series)
LABELS_USED: dict[str, frozenset[str]] = {
    "neuroncore_utilization_ratio": frozenset({"neuroncore", "runtime_tag"}),
    "neuroncore_memory_usage_constants": frozenset({"neuroncore", "runtime_tag", "memory_location"}),
    "neuroncore_memory_usage_model_code": frozenset({"neuroncore", "runtime_tag", "memory_location"}),
    "neuroncore_memory_usage_model_shared_scratchpad": frozenset({"neuroncore", "runtime_tag", "memory_location"}),
    "neuroncore_memory_usage_runtime_memory": frozenset({"neuroncore", "runtime_tag", "memory_location"}),
    "neuroncore_memory_usage_tensors": frozenset({"neuroncore", "runtime_tag", "memory_location"}),
    "execution_errors_total": frozenset({"runtime_tag", "error_type"}),
    "execution_status_total": frozenset({"runtime_tag", "status_type"}),
    "neuron_runtime_memory_used_bytes": frozenset({"runtime_tag", "memory_location"}),
    "hardware_ecc_events_total": frozenset({"neuron_device_index", "event_type"}),
    "execution_latency_seconds": frozenset({"runtime_tag", "percentile"}),
    "neuron_hardware_info": frozenset({"neuroncore_per_device_count", "neuron_device_count"}),
}
INSTANCE_LABELS = frozenset(
    {"instance_id", "instance_type", "availability_zone", "region", "subnet_id", "instance_name"}
)
# the scraper config's relabels: source label -> CloudWatch dimension
RELABELS: dict[str, str] = {
    "ultraserver_id": "UltraServer",
    "neuroncore": "NeuronCore",
    "neuron_device_index": "NeuronDevice",
    "instance_id": "NodeName",
}

Sample = tuple[str, dict[str, str], float]  # (sample name, labels, value)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca_and_server_cert(directory: Path) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate, server key): a CA like the add-on's and a server certificate it
    signed for the Service's DNS names (and 127.0.0.1), made with the openssl command line."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-agent-ca",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-keyout", "ca.key", "-out", "tls-ca.crt", cwd=directory)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={SERVICE_NAME}",
             "-keyout", "server.key", "-out", "server.csr", cwd=directory)  # fmt: skip
    names = [SERVICE_NAME, f"{SERVICE_NAME}.{NAMESPACE}", f"{SERVICE_NAME}.{NAMESPACE}.svc"]
    (directory / "server.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
        "subjectAltName=" + ",".join([*(f"DNS:{n}" for n in names), "IP:127.0.0.1"]) + "\n"
    )
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "tls-ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-extfile", "server.ext", "-out", "server.crt", cwd=directory)  # fmt: skip
    return directory / "tls-ca.crt", directory / "server.crt", directory / "server.key"


def scrape(port: int, ca: Path, server_name: str = SERVICE_NAME, path: str = "/metrics") -> tuple[int, str, str]:
    """GET over HTTPS from 127.0.0.1:port, verifying the certificate against ``ca`` for ``server_name`` (the
    name the agent dials); (status, content type, body)."""
    ctx = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=30) as raw,
        ctx.wrap_socket(raw, server_hostname=server_name) as tls,
    ):
        request = f"GET {path} HTTP/1.1\r\nHost: {server_name}:{port}\r\nAccept: {ACCEPT}\r\nConnection: close\r\n\r\n"
        tls.sendall(request.encode())
        chunks = []
        while data := tls.recv(65536):
            chunks.append(data)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = _unchunk(body)
    return status, headers.get("content-type", ""), body.decode()


def _unchunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2 :]
    return bytes(out)


def kept_samples(openmetrics_text: str) -> list[Sample]:
    """The samples the agent keeps: parsed as OpenMetrics, filtered by its name regex."""
    out: list[Sample] = []
    for family in text_string_to_metric_families(openmetrics_text):
        for s in family.samples:
            if KEEP.fullmatch(s.name):
                out.append((s.name, dict(s.labels), s.value))
    return out
