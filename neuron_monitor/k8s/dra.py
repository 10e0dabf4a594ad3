"""What the API server knows about DRA devices and claims: ResourceSlices -> device index, ResourceClaims -> pod UID
and LNC.

Reads: ``resource.k8s.io`` ResourceSlices of one driver (on this node when the node name is known) and the
ResourceClaims named by the kubelet, through ``KubeApi`` (read only: list resourceslices, get resourceclaims). Returns:
``SliceDevice`` per (pool, device name): the Neuron driver's ``deviceId`` attribute, its ``resourceType`` and the PCI
address of its EFA adapter (``resource.aws.com/devicegroup1_id``, for the EFA join); ``ClaimDetails`` per claim: the
UIDs of the pods it is reserved for, the ``logicalNeuronCore`` its ``NeuronConfig`` sets for each allocated device, and
the devices it holds with admin access.

Parsing never trusts the answer's shape: anything of the wrong type is skipped, string values are clipped, at most
``MAX_SLICE_DEVICES`` devices and ``MAX_PAGES`` pages are read. ``DraDirectory`` caches both for ``max_age``
seconds and reads at most ``max_claim_gets`` claims per refresh, so a node with many claims costs a bounded number
of requests per period; after a request with no HTTP answer (a timeout) it asks nothing more until the next refresh,
so an unreachable server costs one timeout per refresh, not one per claim.

Only this node's slices are used: the list asks for ``spec.nodeName=<node>``, and a slice that names another node
(or none) anyway, from a server that ignores the selector or a pool name shared across nodes, is refused and named
in ``errors``; without a node name, slices are used only while they all name one node.

Device names without the API: ``index_from_name`` accepts the two documented forms, ``neurondeviceN`` (AWS's DRA
docs) and ``neuron-device-N`` (the CloudWatch agent's open pull request), and nothing else.
"""

from __future__ import annotations

import re
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from neuron_monitor.k8s.kubeapi import KubeApi, KubeApiError

NEURON_DRA_DRIVER = "neuron.aws.com"
NEURON_CONFIG_KIND = "NeuronConfig"
DEVICE_ID_ATTRIBUTE = "deviceId"
RESOURCE_TYPE_ATTRIBUTE = "resourceType"
EFA_GROUP_ATTRIBUTE = "resource.aws.com/devicegroup1_id"  # the PCI address of the EFA adapter serving the device
_PCI_ADDRESS = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
NODE_RESOURCE_TYPE = "neuron_node"  # an UltraServer "node" device: every Neuron device of the node
MAX_INDEX = 4095
MAX_SLICE_DEVICES = 4096
MAX_PAGES = 8
PAGE_LIMIT = "200"
MAX_NAME_CHARS = 253
API_VERSIONS = ("v1", "v1beta2", "v1beta1")  # resource.k8s.io: v1 from Kubernetes 1.34
_DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_NAME_PREFIXES = ("neurondevice", "neuron-device-")

DeviceKey = tuple[str, str]  # (pool, device name)


def index_from_name(name: str, max_index: int = MAX_INDEX) -> int | None:
    """The device index in ``neurondeviceN`` or ``neuron-device-N`` (N plain decimal), else None."""
    for prefix in _NAME_PREFIXES:
        if name.startswith(prefix):
            digits = name[len(prefix) :]
            if digits.isascii() and digits.isdigit() and len(digits) <= 5:
                idx = int(digits)
                return idx if idx <= max_index else None
    return None


def is_object_name(name: str) -> bool:
    """A Kubernetes object name (DNS subdomain): anything else never reaches a URL."""
    return len(name) <= MAX_NAME_CHARS and _DNS_NAME.fullmatch(name) is not None


@dataclass(frozen=True)
class SliceDevice:
    device_id: int | None
    resource_type: str = ""
    efa_address: str = ""  # EFA_GROUP_ATTRIBUTE when it is a PCI address, else ""


def efa_addresses(devices: dict[DeviceKey, SliceDevice]) -> dict[int, str]:
    """Neuron device index -> the PCI address of its EFA adapter, for the devices whose slice names both."""
    return {d.device_id: d.efa_address for d in devices.values() if d.device_id is not None and d.efa_address}


@dataclass
class ClaimDetails:
    uid: str = ""
    pod_uids: dict[str, str] = field(default_factory=dict)  # pod name -> uid (pods the claim is reserved for)
    lnc: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (driver, pool, device) -> LNC
    admin: set[tuple[str, str, str]] = field(default_factory=set)  # devices held with adminAccess


def _text(value: object, limit: int = MAX_NAME_CHARS) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _attribute(attrs: dict[str, Any], driver: str, name: str) -> object:
    """A device attribute's value, by its short name or qualified with the driver's domain."""
    raw = attrs.get(name)
    if raw is None:
        raw = attrs.get(f"{driver}/{name}")
    raw = _dict(raw)
    for kind in ("int", "string", "version", "bool"):
        if kind in raw:
            return raw[kind]
    return None


def slice_node(item: object) -> str:
    """The node a ResourceSlice describes (``spec.nodeName``; empty for one that names none)."""
    return _text(_dict(_dict(item).get("spec")).get("nodeName"))


def slice_name(item: object) -> str:
    return _text(_dict(_dict(item).get("metadata")).get("name"), 80) or "(unnamed)"


class NodeCheck:
    """Which slices are this node's: with ``node_name``, those whose ``spec.nodeName`` is it; without, those of
    the one node every listed slice names (more than one: none). ``refused`` says what was left out."""

    def __init__(self, node_name: str) -> None:
        self.node_name = node_name
        self.refused: list[tuple[str, str]] = []  # (slice name, the node it names)
        self.nodes: set[str] = set()

    def keep(self, items: list[Any], driver: str) -> list[Any]:
        out = []
        for item in items:
            if _dict(_dict(item).get("spec")).get("driver") != driver:
                continue
            node = slice_node(item)
            self.nodes.add(node)
            if not node or (self.node_name and node != self.node_name):
                if len(self.refused) < MAX_PAGES * int(PAGE_LIMIT):
                    self.refused.append((slice_name(item), node))
                continue
            out.append(item)
        return out

    def ambiguous(self) -> bool:
        """Without a node name: the slices name more than one node, so none can be trusted as this one's."""
        return not self.node_name and len(self.nodes - {""}) > 1

    def error(self) -> str:
        """One line naming what was refused (empty when nothing was)."""
        if self.ambiguous():
            nodes = sorted(self.nodes - {""})
            shown = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
            return (
                f"resourceslices: refused every slice: they name {len(nodes)} nodes ({shown}) and this node's "
                "name is not known (set NODE_NAME or --node-name)"
            )
        if not self.refused:
            return ""
        name, node = self.refused[0]
        where = f"of node {node!r}" if node else "bound to no node"
        more = f" and {len(self.refused) - 1} more" if len(self.refused) > 1 else ""
        mine = f" (this node is {self.node_name!r})" if self.node_name else ""
        return f"resourceslices: refused slice {name!r} {where}{more}{mine}: only this node's devices are attributed"


def parse_slices(items: list[Any], driver: str, out: dict[DeviceKey, SliceDevice], gen: dict[str, int]) -> None:
    """Add the devices of ``items`` (ResourceSlice objects) of ``driver`` to ``out``, newest pool generation only."""
    for item in items:
        spec = _dict(_dict(item).get("spec"))
        if spec.get("driver") != driver:
            continue
        pool = _dict(spec.get("pool"))
        pool_name = _text(pool.get("name"))
        generation = pool.get("generation")
        generation = generation if isinstance(generation, int) and not isinstance(generation, bool) else 0
        seen = gen.get(pool_name)
        if seen is not None and generation < seen:
            continue
        if seen is not None and generation > seen:  # a newer generation replaces the pool's devices
            for key in [k for k in out if k[0] == pool_name]:
                del out[key]
        gen[pool_name] = generation
        for device in _list(spec.get("devices")):
            if len(out) >= MAX_SLICE_DEVICES:
                return
            device = _dict(device)
            name = _text(device.get("name"))
            if not name:
                continue
            attrs = _dict(device.get("attributes") or _dict(device.get("basic")).get("attributes"))
            raw_id = _attribute(attrs, driver, DEVICE_ID_ATTRIBUTE)
            device_id = (
                raw_id
                if isinstance(raw_id, int) and not isinstance(raw_id, bool) and 0 <= raw_id <= MAX_INDEX
                else None
            )
            rtype = _attribute(attrs, driver, RESOURCE_TYPE_ATTRIBUTE)
            efa = _text(_attribute(attrs, driver, EFA_GROUP_ATTRIBUTE), 16).lower()
            efa = efa if _PCI_ADDRESS.fullmatch(efa) else ""
            out[(pool_name, name)] = SliceDevice(device_id, _text(rtype, 64), efa)


def _lnc_of(parameters: dict[str, Any]) -> int | None:
    if parameters.get("kind") != NEURON_CONFIG_KIND:
        return None
    lnc = parameters.get("logicalNeuronCore")
    if isinstance(lnc, str) and lnc.isdigit():
        lnc = int(lnc)
    return lnc if isinstance(lnc, int) and not isinstance(lnc, bool) and 1 <= lnc <= 8 else None


def _applies(requests: list[Any], request: str) -> bool:
    if not requests:
        return True
    parent = request.split("/", 1)[0]  # a subrequest "req/sub" is configured by its parent's name too
    return request in requests or parent in requests


def parse_claim(obj: object, driver: str) -> ClaimDetails:
    """A ResourceClaim object -> pod UIDs it is reserved for, per-device LNC and admin-access devices."""
    claim = _dict(obj)
    details = ClaimDetails(uid=_text(_dict(claim.get("metadata")).get("uid"), 64))
    status = _dict(claim.get("status"))
    for consumer in _list(status.get("reservedFor")):
        consumer = _dict(consumer)
        if consumer.get("resource") == "pods" and not consumer.get("apiGroup"):
            name, uid = _text(consumer.get("name")), _text(consumer.get("uid"), 64)
            if name and uid and len(details.pod_uids) < 256:
                details.pod_uids[name] = uid
    devices = _dict(_dict(status.get("allocation")).get("devices"))
    configs: list[tuple[list[Any], int]] = []
    for config in _list(devices.get("config")):
        config = _dict(config)
        opaque = _dict(config.get("opaque"))
        if opaque.get("driver") != driver:
            continue
        lnc = _lnc_of(_dict(opaque.get("parameters")))
        if lnc is not None:
            configs.append((_list(config.get("requests")), lnc))
    for result in _list(devices.get("results"))[:MAX_SLICE_DEVICES]:
        result = _dict(result)
        if result.get("driver") != driver:
            continue
        key = (driver, _text(result.get("pool")), _text(result.get("device")))
        if result.get("adminAccess") is True:
            details.admin.add(key)
        request = _text(result.get("request"))
        chosen = None
        for requests, lnc in configs:  # the last matching entry wins (claim config follows class config)
            if _applies(requests, request):
                chosen = lnc
        if chosen is not None:
            details.lnc[key] = chosen
    return details


class DraDirectory:
    """ResourceSlices and ResourceClaims from the API server, cached; errors are kept as one line each."""

    def __init__(
        self,
        api: KubeApi,
        driver: str = NEURON_DRA_DRIVER,
        node_name: str = "",
        max_age: float = 60.0,
        max_claim_gets: int = 16,
        clock: Any = time.monotonic,
    ) -> None:
        self.api = api
        self.driver = driver
        self.node_name = node_name
        self.max_age = max_age
        self.max_claim_gets = max_claim_gets
        self.clock = clock
        self.devices: dict[DeviceKey, SliceDevice] = {}
        self._slices_read: float | None = None
        self._claims: dict[tuple[str, str], tuple[float, ClaimDetails | None]] = {}
        self._gets_left = max_claim_gets
        self._slice_error = ""
        self._refused_error = ""  # slices of another node (or of none) in the last listing
        self._unreachable = False  # a request of this refresh got no HTTP answer: one timeout per refresh at most
        self._claim_errors: dict[tuple[str, str], str] = {}
        self._version = API_VERSIONS[0]

    def begin(self) -> None:
        """Start a refresh: renew its budget of claim reads, and try the server again."""
        self._gets_left = self.max_claim_gets
        self._unreachable = False

    def _failed(self, e: KubeApiError) -> None:
        if e.status == 0:  # no HTTP answer (timeout, refused, TLS): ask nothing more in this refresh
            self._unreachable = True

    @property
    def errors(self) -> list[str]:
        """What the last reads that failed said (until a read of the same thing succeeds): what is cached is
        missing exactly this, so it is reported at every refresh, not only at those that read again."""
        out = [text for text in (self._slice_error, self._refused_error) if text]
        for text in self._claim_errors.values():
            if text not in out and len(out) < 8:
                out.append(text)
        return out

    def _list_slices(self) -> dict[DeviceKey, SliceDevice]:
        selector = f"spec.driver={self.driver}"
        if self.node_name:
            selector += f",spec.nodeName={self.node_name}"
        last: KubeApiError | None = None
        for version in (self._version, *[v for v in API_VERSIONS if v != self._version]):
            devices: dict[DeviceKey, SliceDevice] = {}
            generations: dict[str, int] = {}
            query = {"fieldSelector": selector, "limit": PAGE_LIMIT}
            check = NodeCheck(self.node_name)
            try:
                for _ in range(MAX_PAGES):
                    answer = _dict(self.api.get(f"/apis/resource.k8s.io/{version}/resourceslices", query))
                    parse_slices(check.keep(_list(answer.get("items")), self.driver), self.driver, devices, generations)
                    token = _text(_dict(answer.get("metadata")).get("continue"), 4096)
                    if not token or len(devices) >= MAX_SLICE_DEVICES:
                        break
                    query = {**query, "continue": token}
            except KubeApiError as e:
                last = e
                if e.status == 404:  # this API version is not served: try the next
                    continue
                raise
            self._version = version
            self._refused_error = check.error()
            return {} if check.ambiguous() else devices
        assert last is not None
        raise last

    def slice_devices(self, stale: bool = False) -> dict[DeviceKey, SliceDevice]:
        """The driver's devices by (pool, name), listed again when older than ``max_age``; ``stale`` (a device is
        missing) lists again sooner, unless the last listing was within a second or failed (then wait)."""
        now = self.clock()
        read = self._slices_read
        young = read is not None and now - read < self.max_age
        if (young and (not stale or now - read < 1.0 or self._slice_error)) or self._unreachable:
            return self.devices
        try:
            self.devices = self._list_slices()
            self._slice_error = ""
        except KubeApiError as e:
            self._slice_error = f"resourceslices: {e}"
            self._failed(e)
        self._slices_read = now
        return self.devices

    def claim(self, namespace: str, name: str) -> ClaimDetails | None:
        """The claim's details (cached up to ``max_age``), or None when unknown (not readable yet or failed)."""
        key = (namespace, name)
        now = self.clock()
        cached = self._claims.get(key)
        if cached is not None and now - cached[0] < self.max_age:
            return cached[1]
        if not (is_object_name(namespace) and is_object_name(name)):
            return None
        if self._gets_left <= 0 or self._unreachable:
            return cached[1] if cached is not None else None
        self._gets_left -= 1
        path = (
            f"/apis/resource.k8s.io/{self._version}/namespaces/{urllib.parse.quote(namespace)}"
            f"/resourceclaims/{urllib.parse.quote(name)}"
        )
        try:
            details: ClaimDetails | None = parse_claim(self.api.get(path), self.driver)
            self._claim_errors.pop(key, None)
        except KubeApiError as e:  # kept for max_age too: a failing claim is asked again after that, not sooner
            self._claim_errors[key] = f"resourceclaims: {e}"
            self._failed(e)
            details = cached[1] if cached is not None else None
        if len(self._claims) >= 4096:
            self._claims.clear()
            self._claim_errors.clear()
        self._claims[key] = (now, details)
        return details

    def forget_claims_except(self, keep: set[tuple[str, str]]) -> None:
        """Drop cached claims no pod on the node uses any more."""
        for key in [k for k in self._claims if k not in keep]:
            del self._claims[key]
            self._claim_errors.pop(key, None)
