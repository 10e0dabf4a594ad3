"""The web configuration file, in the Prometheus exporter-toolkit format: TLS and basic auth.

Reads YAML like::

    tls_server_config: {cert_file: server.crt, key_file: server.key, client_auth_type: NoClientCert,
                        client_ca_file: ca.crt, min_version: TLS12}
    http_server_config: {headers: {X-Frame-Options: deny}}
    basic_auth_users: {prometheus: "$2b$12$..."}         # bcrypt hashes

and returns a validated ``WebConfig`` (relative paths resolved against the file's directory, as exporter-toolkit
does), an ``ssl.SSLContext`` for it and a ``BasicAuth`` checker. Every problem is a ``WebConfigError`` with a
one-line message. Keys exporter-toolkit knows but this exporter does not implement are refused by name.
"""

from __future__ import annotations

import base64
import hashlib
import os
import ssl
import threading
from pathlib import Path
from typing import Literal

import bcrypt
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_DUMMY_HASH = bcrypt.hashpw(b"not a password", bcrypt.gensalt(rounds=4))


class WebConfigError(Exception):
    """A web configuration problem, as one line."""


class TLSServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cert_file: str
    key_file: str
    client_auth_type: Literal["NoClientCert", "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"] = "NoClientCert"
    client_ca_file: str | None = None
    min_version: Literal["TLS10", "TLS11", "TLS12", "TLS13"] = "TLS12"
    max_version: Literal["TLS10", "TLS11", "TLS12", "TLS13"] | None = None
    prefer_server_cipher_suites: bool | None = None  # accepted for compatibility; OpenSSL decides


class HTTPServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    headers: dict[str, str] = {}
    http2: bool | None = None  # accepted for compatibility; this server speaks HTTP/1.1


class WebConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tls_server_config: TLSServerConfig | None = None
    http_server_config: HTTPServerConfig = HTTPServerConfig()
    basic_auth_users: dict[str, str] = {}

    @field_validator("basic_auth_users")
    @classmethod
    def _bcrypt_hashes(cls, users: dict[str, str]) -> dict[str, str]:
        for user, hashed in users.items():
            if not (hashed.startswith(("$2a$", "$2b$", "$2y$")) and len(hashed) == 60):
                raise ValueError(f"the password of user {user!r} is not a bcrypt hash")
        return users


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        return f"{where}: unknown or unsupported setting"
    return f"{where}: {err['msg']}" if where else err["msg"]


def load_web_config(path: str | os.PathLike[str]) -> WebConfig:
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise WebConfigError(f"cannot read web config {p}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise WebConfigError(f"web config {p} is not valid YAML: {str(e).splitlines()[0]}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise WebConfigError(f"web config {p}: expected a mapping at the top level")
    try:
        config = WebConfig.model_validate(raw)
    except ValidationError as e:
        raise WebConfigError(f"web config {p}: {_first_error(e)}") from None
    tls = config.tls_server_config
    if tls is not None:
        base = p.parent
        tls.cert_file = str(base / tls.cert_file)
        tls.key_file = str(base / tls.key_file)
        if tls.client_ca_file:
            tls.client_ca_file = str(base / tls.client_ca_file)
        if tls.client_auth_type != "NoClientCert" and not tls.client_ca_file:
            raise WebConfigError(f"web config {p}: client_auth_type {tls.client_auth_type} needs client_ca_file")
    return config


class TLSContext:
    """An SSL context that reloads its certificate and key when their files change (checked every 5 s)."""

    def __init__(self, tls: TLSServerConfig) -> None:
        self.tls = tls
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = TLS_VERSIONS[tls.min_version]
        if tls.max_version:
            self.context.maximum_version = TLS_VERSIONS[tls.max_version]
        self.context.verify_mode = CLIENT_AUTH[tls.client_auth_type]
        if tls.client_ca_file:
            try:
                self.context.load_verify_locations(cafile=tls.client_ca_file)
            except (OSError, ssl.SSLError) as e:
                raise WebConfigError(f"cannot load client_ca_file {tls.client_ca_file}: {e}") from None
        self._stamp = self._file_stamp()
        self._load()
        self._checked = 0.0
        self._lock = threading.Lock()

    def _file_stamp(self) -> tuple[tuple[int, int], ...]:
        try:
            return tuple((s.st_mtime_ns, s.st_size) for s in map(os.stat, (self.tls.cert_file, self.tls.key_file)))
        except OSError:
            return ()

    def _load(self) -> None:
        try:
            self.context.load_cert_chain(certfile=self.tls.cert_file, keyfile=self.tls.key_file)
        except (OSError, ssl.SSLError) as e:
            raise WebConfigError(f"cannot load TLS certificate/key ({self.tls.cert_file}): {e}") from None

    def maybe_reload(self, now: float) -> bool:
        """Reload the certificate if its files changed; keeps the old one if the new pair does not load."""
        with self._lock:
            if now - self._checked < 5.0:
                return False
            self._checked = now
            stamp = self._file_stamp()
            if not stamp or stamp == self._stamp:
                return False
            self._stamp = stamp
            try:
                self._load()
            except WebConfigError:
                return False
            return True


class BasicAuth:
    """Checks ``Authorization: Basic`` headers against bcrypt hashes; verified pairs are cached in memory."""

    def __init__(self, users: dict[str, str]) -> None:
        self.users = {u: h.encode() for u, h in users.items()}
        self._verified: set[bytes] = set()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self.users)

    def check(self, header: str | None) -> bool:
        if not self.users:
            return True
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode("utf-8").partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        key = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        with self._lock:
            if key in self._verified:
                return True
        hashed = self.users.get(user)
        try:  # an unknown user costs a bcrypt check too, so timing does not tell which users exist
            ok = bcrypt.checkpw(password.encode(), hashed if hashed is not None else _DUMMY_HASH)
        except ValueError:
            ok = False
        ok = ok and hashed is not None
        if ok:
            with self._lock:
                if len(self._verified) > 1024:
                    self._verified.clear()
                self._verified.add(key)
        return ok
