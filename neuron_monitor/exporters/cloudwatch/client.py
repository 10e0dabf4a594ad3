"""The boto3 CloudWatch client: region and credentials the boto3 way, botocore's own retries off.

``make_client(region, endpoint_url, profile)`` returns ``(client, protocol)`` or raises ``SetupError`` with a
one-line message (no region, no credentials, unknown profile). Credentials come from boto3's chain: environment,
shared config/credentials profile, container or instance role. Retries are left to ``publisher`` (one attempt per
call here) because botocore would also resend requests that got no answer, which could store a datum twice. Each
request's whole exchange ends within ``connect_timeout + read_timeout`` seconds (``transport.DeadlineTransport``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, cast

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError

from neuron_monitor.exporters.cloudwatch.transport import DeadlineTransport

USER_AGENT = "neuron-monitor-cloudwatch"


class SetupError(Exception):
    """The exporter cannot start: wrong or missing AWS settings."""


def make_client(
    region: str | None,
    endpoint_url: str | None = None,
    profile: str | None = None,
    connect_timeout: float = 5.0,
    read_timeout: float = 20.0,
    on_credentials: Callable[..., None] | None = None,
) -> tuple[Any, str]:
    """``region``: --region, else AWS_REGION (which boto3 itself ignores; the AWS SDKs' reference gives it
    precedence: https://docs.aws.amazon.com/sdkref/latest/guide/feature-region.html), else boto3's chain
    (AWS_DEFAULT_REGION, the profile). ``on_credentials`` gets the access key id, secret key and session token
    found, so that logging can redact them."""
    region = region or os.environ.get("AWS_REGION") or None
    try:
        session = boto3.Session(profile_name=profile, region_name=region)
    except BotoCoreError as exc:  # ProfileNotFound and friends
        raise SetupError(str(exc)) from None
    if not session.region_name:
        raise SetupError("no AWS region: pass --region or set AWS_REGION / AWS_DEFAULT_REGION")
    try:
        credentials = session.get_credentials()
    except BotoCoreError as exc:
        raise SetupError(f"cannot load AWS credentials: {exc}") from None
    if credentials is None:
        raise SetupError(
            "no AWS credentials found (looked in the environment, the shared config/credentials files "
            "and the container/instance role)"
        )
    if on_credentials is not None:
        try:
            frozen = credentials.get_frozen_credentials()
        except BotoCoreError as exc:
            raise SetupError(f"cannot load AWS credentials: {exc}") from None
        on_credentials(frozen.access_key, frozen.secret_key, frozen.token)
    config = Config(
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        user_agent_extra=USER_AGENT,
        max_pool_connections=2,
        tcp_keepalive=True,
    )
    try:
        client = session.client("cloudwatch", endpoint_url=endpoint_url, config=config)
    except (BotoCoreError, ValueError) as exc:
        raise SetupError(f"cannot create the CloudWatch client: {exc}") from None
    core: Any = session._session  # botocore's session: AWS_CA_BUNDLE or the profile's ca_bundle, as botocore reads it
    ca_bundle = core.get_config_variable("ca_bundle")
    # every request's whole exchange within connect + read timeout (transport.py: a total, not per read)
    transport = DeadlineTransport(connect_timeout + read_timeout, ca_bundle if isinstance(ca_bundle, str) else None)
    client.meta.events.register("before-send", cast(Any, transport))
    return client, str(client.meta.service_model.protocol)
