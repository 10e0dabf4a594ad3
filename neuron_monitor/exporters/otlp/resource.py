"""The resource every request describes: this service, this host, its cloud placement and its Kubernetes node.

Attributes (OpenTelemetry semantic conventions: ``service.*``, ``host.*``, ``cloud.*``, ``k8s.node.name``):
``service.name`` (``neuron-monitor``, or ``OTEL_SERVICE_NAME``), ``service.version``, ``service.instance.id`` (the
host name: Prometheus makes it the ``instance`` label of pushed series, as the scrape path has one per host),
``host.name``, ``host.id`` (the EC2 instance id), ``host.type`` (the instance type), ``cloud.provider`` (``aws``),
``cloud.platform`` (``aws_ec2``), ``cloud.region``, ``cloud.availability_zone`` (from the report's
``instance_info``), ``k8s.node.name`` when known (``--k8s-node-name`` or ``NODE_NAME``). ``OTEL_RESOURCE_ATTRIBUTES``
(``key=value,...``, values percent-decoded) adds attributes and overrides the ones above, as the specification
asks of SDKs.
"""

from __future__ import annotations

import urllib.parse

from neuron_monitor.exporters.otlp.model import Pairs
from neuron_monitor.schema.info import InstanceInfo

SERVICE_NAME = "neuron-monitor"


class ResourceError(ValueError):
    """OTEL_RESOURCE_ATTRIBUTES is malformed."""


def parse_resource_attributes(text: str) -> Pairs:
    """``OTEL_RESOURCE_ATTRIBUTES``: comma-separated ``key=value`` pairs, values percent-encoded (W3C Baggage
    syntax without properties). Raises ``ResourceError`` on a pair without ``=`` or with an empty key."""
    pairs: list[tuple[str, str]] = []
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ResourceError(f"OTEL_RESOURCE_ATTRIBUTES: {item.strip()[:80]!r} is not key=value")
        pairs.append((key, urllib.parse.unquote(value.strip())))
    return tuple(pairs)


class ResourceBuilder:
    """The resource attributes of a report (rebuilt only when the report's instance info changes)."""

    def __init__(
        self, version: str, host_name: str, node_name: str = "", service_name: str = "", extra: Pairs = ()
    ) -> None:
        self.version = version
        self.host_name = host_name
        self.node_name = node_name
        self.service_name = service_name or SERVICE_NAME
        self.explicit_service_name = bool(service_name)  # OTEL_SERVICE_NAME wins over OTEL_RESOURCE_ATTRIBUTES
        self.extra = extra
        self._key: tuple[str | None, ...] | None = None
        self._pairs: Pairs = ()

    def attributes(self, info: InstanceInfo | None, keep: bool = False) -> Pairs:
        """The resource of a report with ``info``; ``keep``: the previous report's (a push without a report)."""
        if keep and self._key is not None:
            return self._pairs
        key = (
            (info.instance_id, info.instance_type, info.instance_region, info.instance_availability_zone)
            if info is not None
            else (None, None, None, None)
        )
        if key != self._key:
            self._key = key
            self._pairs = self._build(*key)
        return self._pairs

    def _build(self, host_id: str | None, host_type: str | None, region: str | None, zone: str | None) -> Pairs:
        attrs: dict[str, str] = {
            "service.name": self.service_name,
            "service.version": self.version,
            "service.instance.id": self.host_name,
            "host.name": self.host_name,
        }
        if host_id:
            attrs["host.id"] = host_id
        if host_type:
            attrs["host.type"] = host_type
        if host_id or host_type or region or zone:
            attrs["cloud.provider"] = "aws"
            attrs["cloud.platform"] = "aws_ec2"
        if region:
            attrs["cloud.region"] = region
        if zone:
            attrs["cloud.availability_zone"] = zone
        if self.node_name:
            attrs["k8s.node.name"] = self.node_name
        for k, v in self.extra:
            attrs[k] = v
        if self.explicit_service_name:
            attrs["service.name"] = self.service_name
        return tuple((k, v) for k, v in attrs.items() if v)
