"""UltraServer identity for ``instance_info``, from the Neuron driver's class attributes in sysfs.

On a Trn2 UltraServer (four trn2u.48xlarge joined by NeuronLink) the driver elects the servers into a pod and
publishes the result in ``/sys/class/neuron_device/`` (aws-neuron-driver, https://github.com/aws-neuron/aws-neuron-driver,
``v3/neuron_pelect.c``: ``npe_class_node_id_show_data``, ``npe_class_server_id_show_data``,
``npe_class_ultraserver_mode_show_data``; the non-UltraServer values in ``v2/neuron_dhal_v2.c``):

- ``server_id_4`` / ``server_id_2``: the pod's serial number (node 0's) for the 4-node / 2-node configuration,
  ``"%016llx\\n"``; ``0000000000000000`` when the host is in no such pod, and also while an election runs;
- ``node_id_4`` / ``node_id_2``: this server's node id in that pod, ``"%d\\n"``; ``-1`` when none, ``busy``
  while an election runs;
- ``ultraserver_mode``: the configurations the pod supports, ``"1,2,4\\n"`` (enum ``neuron_ultraserver_mode``
  in ``neuron_driver_shared.h``: 1 X4, 2 X2H, 3 X2V, 4 X1); empty when none, ``busy`` while an election runs.

The 4-node pod is the UltraServer; the 2-node id is used only when there is no 4-node one. ``ultraserver_id``
is ``"u-"`` plus the 16 hex digits: the form AWS's own CloudWatch agent tests feed in
(``u-cafb07773a569a23``, aws/amazon-cloudwatch-agent-test, 2025-09), whose 16 hex digits are exactly the
driver's ``%016llx``. While an election runs (``busy``) the last identity read is kept, so series do not flap.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from neuron_monitor.host.rootfs import RootFS

CLASS_DIR = "sys/class/neuron_device"
FILES: tuple[str, ...] = ("server_id_4", "node_id_4", "server_id_2", "node_id_2", "ultraserver_mode")
MODE_NAMES: dict[str, str] = {"1": "X4", "2": "X2H", "3": "X2V", "4": "X1"}
NO_SERVER = "0" * 16
REFRESH_SECONDS = 10.0


@dataclass(frozen=True)
class UltraServer:
    server_id: str  # 16 lowercase hex digits, the driver's pod serial number
    node_count: int  # 4 or 2: the pod configuration the id belongs to
    node_id: int | None  # this server's node id in the pod (None if the driver did not say)
    modes: tuple[str, ...]  # configurations the pod supports, e.g. ("X4", "X2H", "X1")

    def instance_fields(self) -> dict[str, Any]:
        """The keys added to ``instance_info`` (``ultraserver_id`` as AWS names it; the others are ours)."""
        return {
            "ultraserver_id": f"u-{self.server_id}",
            "ultraserver_node_id": self.node_id if self.node_id is not None else -1,
            "ultraserver_node_count": self.node_count,
            "ultraserver_modes": ",".join(self.modes),
        }


class Busy:
    """An election is running: the driver's answers mean nothing yet."""


BUSY = Busy()


def _text(raw: bytes | None) -> str:
    return raw.decode("ascii", "replace").strip() if raw is not None else ""


def _server_id(raw: bytes | None) -> str | None:
    text = _text(raw).lower()
    if len(text) != 16 or text == NO_SERVER or any(c not in "0123456789abcdef" for c in text):
        return None
    return text


def _node_id(raw: bytes | None) -> int | None:
    text = _text(raw)
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value >= 0 else None


def parse_ultraserver(files: dict[str, bytes | None]) -> UltraServer | Busy | None:
    """The identity the driver's files give (raw bytes by file name; None = file missing): an `UltraServer`,
    ``BUSY`` while an election runs, or None when the host is not part of an UltraServer pod."""
    if any(_text(files.get(name)) == "busy" for name in ("node_id_4", "node_id_2", "ultraserver_mode")):
        return BUSY
    modes = tuple(MODE_NAMES[m] for m in _text(files.get("ultraserver_mode")).split(",") if m.strip() in MODE_NAMES)
    for count in (4, 2):
        server = _server_id(files.get(f"server_id_{count}"))
        if server is not None:
            return UltraServer(server, count, _node_id(files.get(f"node_id_{count}")), modes)
    return None


def read_files(root: RootFS) -> dict[str, bytes | None]:
    """The five class attribute files, raw (None for a file that cannot be read). At most 64 bytes each, opened
    non-blocking, so a stray FIFO or a huge file under ``--root`` cannot stall or flood the daemon."""
    out: dict[str, bytes | None] = {}
    for name in FILES:
        try:
            fd = root.open_regular(f"{CLASS_DIR}/{name}")  # inside the root, non-blocking, regular only
        except OSError:
            out[name] = None
            continue
        try:
            out[name] = os.read(fd, 64)
        except OSError:
            out[name] = None
        finally:
            os.close(fd)
    return out


class UltraServerSource:
    """The current UltraServer identity, re-read at most every ``refresh`` seconds (the pod can be re-elected
    while the daemon runs); keeps the last identity while the driver says ``busy``."""

    def __init__(self, root: RootFS, refresh: float = REFRESH_SECONDS, clock: Callable[[], float] = time.monotonic):
        self.root = root
        self.refresh = refresh
        self.clock = clock
        self._next = 0.0
        self._current: UltraServer | None = None

    def get(self) -> UltraServer | None:
        now = self.clock()
        if now >= self._next:
            self._next = now + self.refresh
            found = parse_ultraserver(read_files(self.root))
            if not isinstance(found, Busy):
                self._current = found
        return self._current


class InstanceInfoWithUltraServer:
    """Wraps an ``instance_info`` getter: adds the UltraServer keys when the host is in an UltraServer.

    The merged object is rebuilt only when the base object or the identity changes, so a report costs a
    comparison, not a copy."""

    def __init__(self, base: Callable[[], dict[str, Any]], source: UltraServerSource) -> None:
        self.base = base
        self.source = source
        self._key: tuple[dict[str, Any], UltraServer | None] | None = None
        self._merged: dict[str, Any] = {}

    def __call__(self) -> dict[str, Any]:
        info = self.base()
        server = self.source.get()
        if server is None:
            return info
        key = (info, server)
        if self._key is None or self._key[0] is not info or self._key[1] != server:
            self._merged = {**info, **server.instance_fields()}
            self._key = key
        return self._merged
