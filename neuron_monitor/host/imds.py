"""EC2 instance identity for ``instance_info``: IMDSv2 (token) with an IMDSv1 fallback, within a time budget.

`fetch_instance_info(endpoint, budget)` returns an `InstanceInfo` (``as_report()``: the ``instance_info`` object):
every field of the guide (subnet via the primary ENI's MAC, instance_name from the ``tags/instance/Name``
metadata category when instance tags are exposed) and ``error`` filled when a required field could not be read.
Off EC2 the whole call gives up within ``budget`` seconds. `InstanceInfoSource` runs it in a background thread and
retries failures, so the daemon never waits on the network.
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
from dataclasses import asdict, dataclass, replace
from typing import Any

from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.util.deadline import BodyTooLarge, Deadline, DeadlineExceeded, exchange
from neuron_monitor.util.sanitize import url_shown

log = logging.getLogger("neuron_monitor.imds")

DEFAULT_ENDPOINT = "http://169.254.169.254"
TOKEN_TTL_SECONDS = 21600
MAX_ANSWER_BYTES = 64 * 1024  # a metadata value (an id, a type, a tag) is a few dozen bytes

# instance_info key -> metadata path; "optional" fields are not errors when absent (per the guide)
_FIELDS: tuple[tuple[str, str, bool], ...] = (
    ("instance_id", "instance-id", False),
    ("instance_type", "instance-type", False),
    ("instance_availability_zone", "placement/availability-zone", False),
    ("instance_availability_zone_id", "placement/availability-zone-id", True),
    ("instance_region", "placement/region", True),
    ("ami_id", "ami-id", False),
)


@dataclass(frozen=True)
class InstanceInfo:
    """The ``instance_info`` object, typed; fields in AWS's key order (see schema.names.INSTANCE_INFO_KEYS)."""

    instance_name: str = ""
    instance_id: str = ""
    instance_type: str = ""
    instance_availability_zone: str = ""
    instance_availability_zone_id: str = ""
    instance_region: str = ""
    ami_id: str = ""
    subnet_id: str = ""
    error: str = ""

    def as_report(self) -> dict[str, Any]:
        """The report's ``instance_info`` object (a new dict, the fields in order)."""
        return asdict(self)


class _ImdsError(Exception):
    pass


class ImdsClient:
    """A tiny IMDS client: PUT /latest/api/token, then GET /latest/meta-data/... with the token."""

    def __init__(self, endpoint: str, deadline: Deadline) -> None:
        u = urllib.parse.urlsplit(endpoint)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"IMDS endpoint must be http://host[:port], got {url_shown(endpoint)!r}")
        self.host = u.hostname
        self.port = u.port or 80
        self.deadline = deadline
        self.token: str | None = None

    def _request(self, method: str, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
        """One exchange within what is left of the whole lookup's budget (a total: ``util.deadline``)."""
        if self.deadline.passed():
            raise _ImdsError("instance metadata service did not answer in time")
        import http.client  # here, not at the top: a daemon without instance metadata (--simulate) never loads it

        conn = http.client.HTTPConnection(self.host, self.port, timeout=max(self.deadline.left(), 0.001))
        try:
            answer = exchange(conn, method, path, headers, self.deadline, MAX_ANSWER_BYTES)
        except DeadlineExceeded:
            raise _ImdsError(
                f"instance metadata service did not answer in time ({self.deadline.seconds:g} s in all)"
            ) from None
        except BodyTooLarge as e:
            raise _ImdsError(f"instance metadata {path}: {e}") from None
        except (OSError, http.client.HTTPException) as e:
            raise _ImdsError(f"instance metadata service unreachable: {e}") from None
        return answer.status, answer.body

    def get_token(self) -> None:
        try:
            status, body = self._request(
                "PUT", "/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL_SECONDS)}
            )
        except _ImdsError:
            raise
        if status == 200 and body:
            self.token = body.decode().strip()
        else:  # IMDSv1-only endpoints answer 403/404/405 here: fall back to unauthenticated GETs
            self.token = None

    def get(self, path: str) -> str | None:
        """The value at /latest/meta-data/<path>, or None when the category does not exist (404)."""
        headers = {"X-aws-ec2-metadata-token": self.token} if self.token else {}
        status, body = self._request("GET", f"/latest/meta-data/{path}", headers)
        if status == 401 and self.token is not None:  # expired token: get a new one once
            self.get_token()
            headers = {"X-aws-ec2-metadata-token": self.token} if self.token else {}
            status, body = self._request("GET", f"/latest/meta-data/{path}", headers)
        if status == 404:
            return None
        if status != 200:
            raise _ImdsError(f"instance metadata {path}: HTTP {status}")
        return body.decode().strip()


def fetch_instance_info(endpoint: str = DEFAULT_ENDPOINT, budget: float = 1.0) -> InstanceInfo:
    """Every field IMDS gives within ``budget`` seconds; ``error`` says what is missing or why IMDS failed."""
    info: dict[str, str] = {}
    try:
        client = ImdsClient(endpoint, Deadline(budget))
        client.get_token()
        missing = []
        for key, path, optional in _FIELDS:
            value = client.get(path)
            if value is None and not optional:
                missing.append(path)
            info[key] = value or ""
        mac = client.get("mac")
        subnet = client.get(f"network/interfaces/macs/{mac}/subnet-id") if mac else None
        if subnet is None:
            missing.append("network/interfaces/macs/<mac>/subnet-id")
        info["subnet_id"] = subnet or ""
        try:
            info["instance_name"] = client.get("tags/instance/Name") or ""
        except _ImdsError:
            info["instance_name"] = ""
        if missing:
            info["error"] = "instance metadata missing: " + ", ".join(missing)
    except (_ImdsError, ValueError) as e:
        info["error"] = str(e)  # the fields read before the failure stay
    return InstanceInfo(**info)


def fill_from_dmi(info: InstanceInfo, root: RootFS) -> InstanceInfo:
    """Without IMDS (off EC2, or a container behind an IMDSv2 hop limit of 1), take the instance type and id
    from DMI, as the Neuron driver itself does; ``error`` keeps saying why IMDS failed."""
    instance_type, instance_id = info.instance_type, info.instance_id
    if not instance_type:
        value = _dmi(root, "sys/class/dmi/id/product_name")
        instance_type = value if "." in value else ""
    if not instance_id:
        value = _dmi(root, "sys/class/dmi/id/board_asset_tag")
        instance_id = value if value.startswith("i-") else ""
    return replace(info, instance_type=instance_type, instance_id=instance_id)


def _dmi(root: RootFS, rel: str) -> str:
    try:
        return root.read_text(rel).strip()
    except OSError:
        return ""


class InstanceInfoSource:
    """Fetches instance_info in the background; `get()` never blocks. Retries failures every ``retry`` s."""

    def __init__(
        self,
        endpoint: str = DEFAULT_ENDPOINT,
        budget: float = 1.0,
        retry: float = 300.0,
        enabled: bool = True,
        root: RootFS | None = None,
    ) -> None:
        self.root = root
        self.endpoint = endpoint
        self.budget = budget
        self.retry = retry
        info = InstanceInfo(error="instance metadata not fetched yet" if enabled else "instance metadata disabled")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._enabled = enabled
        if not enabled and root is not None:
            info = fill_from_dmi(info, root)
        self._info = info
        self._report = info.as_report()  # what `get` hands out: the same object until the next fetch

    def start(self) -> None:
        if not self._enabled:
            return
        self._thread = threading.Thread(target=self._run, name="imds", daemon=True)
        self._thread.start()

    def fetch_now(self) -> None:
        info = fetch_instance_info(self.endpoint, self.budget)
        if info.error and self.root is not None:
            info = fill_from_dmi(info, self.root)
        report = info.as_report()
        with self._lock:
            self._info, self._report = info, report
        if info.error:
            log.info("instance_info: %s", info.error)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.fetch_now()
            if not self._info.error:
                return
            self._stop.wait(self.retry)

    def get(self) -> dict[str, Any]:
        """The newest ``instance_info`` object (never blocks). One attribute read, which is atomic: the fetch thread
        replaces the whole object (under its lock, with ``_info``), so no lock is taken per report here."""
        return self._report

    def close(self) -> None:
        self._stop.set()
