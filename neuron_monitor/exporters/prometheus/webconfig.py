"""The web configuration file, in the Prometheus exporter-toolkit format: TLS and basic auth.

Reads YAML like::

    tls_server_config: {cert_file: server.crt, key_file: server.key, client_auth_type: NoClientCert,
                        client_ca_file: ca.crt, min_version: TLS12}
    http_server_config: {headers: {X-Frame-Options: deny}}
    basic_auth_users: {prometheus: "$2b$12$..."}         # bcrypt hashes

and returns a validated ``WebConfig`` (relative paths resolved against the file's directory, as exporter-toolkit
does); ``tls`` builds the SSL context from it and ``auth`` checks basic auth. Every problem is a
``WebConfigError`` with a one-line message. Keys exporter-toolkit knows but this exporter does not implement
are refused by name.
"""

from __future__ import annotations

import os
import ssl
import stat
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from neuron_monitor.util.inputfile import CONFIG_MAX_BYTES, InputFileError, kind_of, read_regular, shown

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


class WebConfigError(Exception):
    """A web configuration problem, as one line of at most 400 characters."""

    def __str__(self) -> str:
        text = " ".join(str(self.args[0] if self.args else "").split())
        return text if len(text) <= 400 else text[:397] + "..."


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
                raise ValueError(f"the password of user {shown(user)} is not a bcrypt hash")
        return users


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        return f"{where}: unknown or unsupported setting"
    return f"{where}: {err['msg']}" if where else err["msg"]


def _check_regular(p: Path, key: str, value: str) -> None:
    """A TLS file named by the web config must be a regular file (a FIFO would block the TLS load)."""
    try:
        mode = os.stat(value).st_mode
    except OSError:
        return  # missing or unreadable: the TLS load names the problem
    if not stat.S_ISREG(mode):
        raise WebConfigError(f"web config {p}: tls_server_config.{key}: {shown(value)} is {kind_of(mode)}")


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a mapping that names one key twice (exporter-toolkit's strict Go parser refuses
    it too): two ``basic_auth_users`` entries for one user would otherwise keep the last hash without a word."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: the base class names it
                break
            if duplicate:
                line = key_node.start_mark.line + 1
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {shown(key)} on line {line}")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_web_config(path: str | os.PathLike[str]) -> WebConfig:
    """Read and validate the web config: a regular file of at most 1 MiB, opened without blocking
    (see inputfile.py); every problem is one `WebConfigError` line."""
    p = Path(path)
    try:
        text = read_regular(p, CONFIG_MAX_BYTES, f"cannot read web config {p}").decode("utf-8")
        raw = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader: plain data only
    except InputFileError as e:
        raise WebConfigError(str(e)) from None
    except UnicodeDecodeError:
        raise WebConfigError(f"web config {p} is not UTF-8 text") from None
    except RecursionError:
        raise WebConfigError(f"web config {p} is not valid YAML: nested too deeply") from None
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
        for key in ("cert_file", "key_file", "client_ca_file"):
            value = getattr(tls, key)
            if value:
                _check_regular(p, key, value)
        if tls.client_auth_type != "NoClientCert" and not tls.client_ca_file:
            raise WebConfigError(f"web config {p}: client_auth_type {tls.client_auth_type} needs client_ca_file")
    return config
