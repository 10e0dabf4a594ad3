"""systemd's readiness protocol, the sending side: one datagram to ``$NOTIFY_SOCKET`` (sd_notify(3)).

The daemon's unit is ``Type=notify``: systemd counts the service as started when the daemon says ``READY=1``,
which it says once its signal handlers are installed and its loop runs. Until then systemd holds back a
``systemctl reload`` (queued behind the start job), so a reload right after a start cannot reach the process
before it can handle SIGHUP, whatever the interpreter's start-up costs (issue 39.2). ``STOPPING=1`` is sent when a
stop begins. Without ``$NOTIFY_SOCKET`` (not under systemd, or another ``Type=``) nothing is sent.

The protocol (https://www.freedesktop.org/software/systemd/man/latest/sd_notify.html): newline-separated
``KEY=VALUE`` assignments in one datagram to the AF_UNIX socket named by ``$NOTIFY_SOCKET``, a path, or an
abstract name when it starts with ``@``.
"""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger("neuron_monitor.daemon.sdnotify")


def notify(state: str) -> bool:
    """Send ``state`` (e.g. ``"READY=1"``) to systemd; True when it was sent, False without a notify socket or when
    the send failed (logged at debug: readiness is best effort, the service runs either way)."""
    where = os.environ.get("NOTIFY_SOCKET", "")
    if not where or where[0] not in "/@":  # unset, or a vsock address (not used for services on a host)
        return False
    address = "\0" + where[1:] if where[0] == "@" else where
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.settimeout(1.0)
            s.connect(address)
            s.sendall(state.encode())
    except OSError as e:
        log.debug("sd_notify %r to %s failed: %s", state, where, e)
        return False
    return True
