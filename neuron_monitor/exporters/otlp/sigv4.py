"""``--sigv4 [REGION]``: requests signed with AWS Signature Version 4 (service ``monitoring``), for CloudWatch's
OTLP endpoint ``https://monitoring.<region>.amazonaws.com/v1/metrics``.

Credentials come from botocore's standard chain (environment, shared config and credentials files, container and
instance roles) and are refreshed by it; the signature is botocore's own ``SigV4Auth`` over the exact body sent
(compressed when it is). The region is REGION, else ``AWS_REGION``, else botocore's (``AWS_DEFAULT_REGION``, the
profile). Every credential value is handed to the log redactor before it is used, so none reaches a log line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, ReadOnlyCredentials
from botocore.exceptions import BotoCoreError
from botocore.session import Session

from neuron_monitor.exporters.otlp.transport import Signer

SERVICE = "monitoring"
SIGNATURE_HEADERS = ("Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-SHA256")


_REGIONAL_HOST = re.compile(r"monitoring(?:-fips)?\.([a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?")


def region_of_endpoint(host: str) -> str:
    """The region a CloudWatch endpoint host names (``monitoring.us-west-2.amazonaws.com``), "" for any other host."""
    m = _REGIONAL_HOST.fullmatch(host.lower())
    return m.group(1) if m else ""


class SigningSetupError(Exception):
    """No region or no credentials: the exporter cannot start with --sigv4."""


def sign(
    credentials: Credentials | ReadOnlyCredentials,
    region: str,
    url: str,
    body: bytes,
    headers: dict[str, str],
    service: str = SERVICE,
) -> dict[str, str]:
    """The signature headers botocore's ``SigV4Auth`` adds to a POST of ``body`` to ``url`` with ``headers``."""
    request = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
    SigV4Auth(credentials, service, region).add_auth(request)
    return {name: str(request.headers[name]) for name in SIGNATURE_HEADERS if name in request.headers}


def make_signer(region: str, on_credentials: Callable[..., None]) -> tuple[Signer, str]:
    """(the signer, the region used); raises ``SigningSetupError`` with a one-line message."""
    try:
        session = Session()
        region = region or os.environ.get("AWS_REGION") or str(session.get_config_variable("region") or "")
        credentials = session.get_credentials()
        frozen = credentials.get_frozen_credentials() if credentials is not None else None
    except BotoCoreError as e:
        raise SigningSetupError(f"--sigv4: cannot load AWS credentials: {e}") from None
    if not region:
        raise SigningSetupError("--sigv4: no AWS region: pass --sigv4 REGION or set AWS_REGION / AWS_DEFAULT_REGION")
    if credentials is None or frozen is None:
        raise SigningSetupError(
            "--sigv4: no AWS credentials found (looked in the environment, the shared config/credentials files"
            " and the container/instance role)"
        )
    on_credentials(frozen.access_key, frozen.secret_key, frozen.token)

    def signer(url: str, body: bytes, headers: dict[str, str]) -> dict[str, str]:
        current = credentials.get_frozen_credentials()  # refreshed by botocore when they expire
        on_credentials(current.access_key, current.secret_key, current.token)
        return sign(current, region, url, body, headers)

    return signer, region
