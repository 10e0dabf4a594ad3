"""TLS for the HTTP front, with the certificate, key and client CA re-read when their files change.

The listening ``ssl.SSLContext`` is built once; its SNI callback (which OpenSSL calls for every handshake, with or
without a server name) moves each new connection to the newest context. ``maybe_reload`` (called by the server
every ``check_interval`` seconds) stats the files and, when one changed, builds a whole new context from them: a
half-written pair (new certificate, old key) does not load, so the previous context stays in use and the load is
retried at the next check. Established connections keep the context they started with.

Every file is read through the project's input discipline (`neuron_monitor.util.inputfile.read_regular`: opened
without blocking, a regular file, at most `TLS_FILE_MAX_BYTES`), at start and at every reload, and OpenSSL is
handed the bytes read (through an anonymous in-memory file), never the path: a key replaced by a FIFO, a device
or a huge file is one error line (exit 2 at start, the previous pair kept on reload) instead of a thread blocked
in open() for good.
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl
import tempfile
from collections.abc import Iterator
from typing import Any

from neuron_monitor.exporters.prometheus.webconfig import CLIENT_AUTH, TLS_VERSIONS, TLSServerConfig, WebConfigError
from neuron_monitor.util.inputfile import InputFileError, read_regular

TLS_FILE_MAX_BYTES = 1024 * 1024  # a certificate chain or key is a few KiB

log = logging.getLogger("neuron_monitor.exporters.prometheus.tls")

Stamp = tuple[tuple[int, int, int], ...]


def _read(path: str, what: str) -> bytes:
    try:
        return read_regular(path, TLS_FILE_MAX_BYTES, f"cannot load {what} {path}")
    except InputFileError as e:
        raise WebConfigError(str(e)) from None


@contextlib.contextmanager
def _as_path(data: bytes) -> Iterator[str]:
    """A path OpenSSL can open that holds ``data``: an anonymous in-memory file (memfd), or where that is not
    available a private temporary file; gone when the block ends."""
    memfd = getattr(os, "memfd_create", None)
    if memfd is not None and os.path.isdir("/proc/self/fd"):
        fd = memfd("neuron-monitor-tls", getattr(os, "MFD_CLOEXEC", 0))
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.NamedTemporaryFile(prefix="neuron-monitor-tls-") as f:
        f.write(data)
        f.flush()
        yield f.name


def build_context(tls: TLSServerConfig) -> ssl.SSLContext:
    """A server context for the configuration; raises ``WebConfigError`` (one line) when a file does not load.
    Each file is read once, with the input discipline (see the module docstring)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = TLS_VERSIONS[tls.min_version]
    if tls.max_version:
        context.maximum_version = TLS_VERSIONS[tls.max_version]
    context.verify_mode = CLIENT_AUTH[tls.client_auth_type]
    if tls.client_ca_file:
        ca = _read(tls.client_ca_file, "client_ca_file")
        try:
            with _as_path(ca) as path:
                context.load_verify_locations(cafile=path)
        except (OSError, ssl.SSLError) as e:
            raise WebConfigError(f"cannot load client_ca_file {tls.client_ca_file}: {e}") from None
    cert = _read(tls.cert_file, "TLS certificate")
    key = _read(tls.key_file, "TLS key")
    try:
        with _as_path(cert) as cert_path, _as_path(key) as key_path:
            context.load_cert_chain(certfile=cert_path, keyfile=key_path)
    except (OSError, ssl.SSLError) as e:
        raise WebConfigError(f"cannot load TLS certificate/key ({tls.cert_file}): {e}") from None
    return context


class ReloadingTLS:
    """The listening context plus the newest context built from the files (see the module docstring)."""

    def __init__(self, tls: TLSServerConfig, check_interval: float = 2.0) -> None:
        self.tls = tls
        self.check_interval = check_interval
        self._stamp = self._file_stamp()
        self.current = build_context(tls)
        self.context = self.current  # the one the listening socket uses
        self.context.sni_callback = self._pick
        self.reloads = 0
        self.reload_failures = 0
        self._failed_stamp: Stamp | None = None

    def _files(self) -> list[str]:
        return [f for f in (self.tls.cert_file, self.tls.key_file, self.tls.client_ca_file) if f]

    def _file_stamp(self) -> Stamp:
        try:
            return tuple((s.st_mtime_ns, s.st_size, s.st_ino) for s in map(os.stat, self._files()))
        except OSError:
            return ()

    def _pick(self, sslobj: Any, server_name: str | None, context: ssl.SSLContext) -> None:
        current = self.current
        if sslobj.context is not current:
            sslobj.context = current

    def maybe_reload(self) -> bool:
        """Build a new context if a file changed; True when one was built. A pair that does not load is kept
        out (the previous context stays) and logged once per change."""
        stamp = self._file_stamp()
        if not stamp or stamp == self._stamp:
            return False
        try:
            context = build_context(self.tls)
        except WebConfigError as e:
            if stamp != self._failed_stamp:
                self._failed_stamp = stamp
                self.reload_failures += 1
                log.warning("kept the previous TLS certificate: %s", e)
            return False
        self._stamp = stamp
        self.current = context
        self.reloads += 1
        log.info("reloaded the TLS certificate and key from %s", self.tls.cert_file)
        return True
