"""How ``neuron-monitor-health --url`` reaches an exporter that serves TLS and asks for basic auth.

The options mirror a Prometheus scrape configuration's ``tls_config`` (``ca_file``, ``cert_file``, ``key_file``)
and ``basic_auth`` (``username``, ``password_file``), so whoever wrote the scrape job can fill them in. The password
is read from a file, never from the command line (where ``ps`` shows it), and is sent only over https: the
exporter asks for basic auth only together with TLS (docs/prometheus.md, "TLS and basic auth"), and a password
sent over plain http would cross the network in the clear. Every file is read with the project's discipline
(regular files only, never a wait, a size cap); every problem is an `AccessError` of one line that never holds
the password.
"""

from __future__ import annotations

import base64
import os
import ssl
import stat
from dataclasses import dataclass

from neuron_monitor.util.inputfile import CONFIG_MAX_BYTES, InputFileError, kind_of, read_regular, shown

PASSWORD_MAX_BYTES = 4096  # a password file holds one line
PATH_SHOWN = 300  # a path in an error line is shown whole up to this many characters


class AccessError(Exception):
    """An option that cannot be used; ``str()`` is one line naming the option and the problem."""


@dataclass(frozen=True, slots=True)
class ExporterAccess:
    """The TLS context for https URLs (None: the system's trust store) and the Authorization header (or None)."""

    tls: ssl.SSLContext | None = None
    authorization: str | None = None


def _regular_path(option: str, path: str) -> str:
    """``path`` when it names a regular file (a FIFO named here would block the TLS load forever)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise AccessError(f"{option} {shown(path, PATH_SHOWN)}: {e.strerror or e}") from None
    if not stat.S_ISREG(mode):
        raise AccessError(f"{option} {shown(path, PATH_SHOWN)}: is {kind_of(mode)}, not a regular file")
    return path


def _password(path: str) -> str:
    try:
        raw = read_regular(path, PASSWORD_MAX_BYTES, f"--password-file {shown(path, PATH_SHOWN)}")
    except InputFileError as e:
        raise AccessError(str(e)) from None
    try:
        password = raw.decode("utf-8").strip()  # as Prometheus trims a password_file
    except UnicodeDecodeError:
        raise AccessError(f"--password-file {shown(path, PATH_SHOWN)}: is not UTF-8 text") from None
    if not password:
        raise AccessError(f"--password-file {shown(path, PATH_SHOWN)}: is empty")
    if "\n" in password or not password.isprintable():
        raise AccessError(f"--password-file {shown(path, PATH_SHOWN)}: holds more than one line or a control character")
    return password


def _tls_context(ca_file: str | None, cert_file: str | None, key_file: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if ca_file is not None:
        try:
            pem = read_regular(ca_file, CONFIG_MAX_BYTES, f"--ca-file {shown(ca_file, PATH_SHOWN)}")
            context = ssl.create_default_context(cadata=pem.decode("ascii"))
        except InputFileError as e:
            raise AccessError(str(e)) from None
        except (UnicodeDecodeError, ssl.SSLError, ValueError):
            raise AccessError(f"--ca-file {shown(ca_file, PATH_SHOWN)}: holds no PEM certificate") from None
    if cert_file is not None and key_file is not None:
        try:
            context.load_cert_chain(_regular_path("--cert-file", cert_file), _regular_path("--key-file", key_file))
        except (ssl.SSLError, OSError) as e:
            why = e.reason if isinstance(e, ssl.SSLError) and e.reason else type(e).__name__
            raise AccessError(f"--cert-file/--key-file: not a certificate and its key ({shown(str(why))})") from None
    return context


def exporter_access(
    scheme: str,
    ca_file: str | None = None,
    cert_file: str | None = None,
    key_file: str | None = None,
    user: str | None = None,
    password_file: str | None = None,
) -> ExporterAccess:
    """The access the options describe for a URL of ``scheme`` (http or https), or `AccessError`."""
    if (cert_file is None) != (key_file is None):
        raise AccessError("--cert-file and --key-file go together")
    if (user is None) != (password_file is None):
        raise AccessError("--user and --password-file go together")
    if scheme != "https":
        given = [o for o, v in (("--ca-file", ca_file), ("--cert-file", cert_file), ("--user", user)) if v]
        if given:
            raise AccessError(
                f"{given[0]} needs an https URL (the exporter serves TLS and basic auth together; a password is "
                "never sent over plain http)"
            )
        return ExporterAccess()
    authorization = None
    if user is not None and password_file is not None:
        if not user or ":" in user or not user.isprintable():
            raise AccessError(f"--user {shown(user)}: empty, or holds a ':' or a control character")
        token = base64.b64encode(f"{user}:{_password(password_file)}".encode()).decode("ascii")
        authorization = f"Basic {token}"
    return ExporterAccess(_tls_context(ca_file, cert_file, key_file), authorization)
