"""CloudWatch requests within one total deadline: botocore's ``before-send`` hook sends them through
``util.deadline.exchange``.

botocore's ``connect_timeout`` and ``read_timeout`` bound each socket operation, not the request: an endpoint (or a
middlebox) that answers one byte every half second holds a call for as long as it keeps doing so (issue 39). The
hook takes each request botocore has signed and sends it itself, connect, request, answer and body all within
``seconds``; a request that gets no complete answer in time raises botocore's own exceptions, so the publisher's
rules stay the same: ``ConnectTimeoutError``/``EndpointConnectionError`` when nothing was sent (retried),
``ReadTimeoutError``/``ConnectionClosedError`` when it was (unconfirmed, never resent).

TLS is verified against the bundle botocore would use (``AWS_CA_BUNDLE``/``ca_bundle``, else botocore's default).
A request that botocore would send through a proxy (``HTTPS_PROXY``/``HTTP_PROXY`` without a ``NO_PROXY`` match)
is left to botocore (the hook returns None): there the per-read timeouts apply.
"""

from __future__ import annotations

import http.client
import ssl
import urllib.parse
import urllib.request
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from botocore.httpsession import get_cert_path

from neuron_monitor.util.deadline import BodyTooLarge, DeadlineExceeded, exchange

MAX_ANSWER_BYTES = 4 * 1024 * 1024  # a PutMetricData answer is a few hundred bytes; an error page a few KiB


class _Raw:
    """What ``AWSResponse.content`` reads the body from."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **kwargs: Any) -> list[bytes]:
        return [self._body]


class DeadlineTransport:
    """A ``before-send`` handler: each request's whole exchange within ``seconds``."""

    def __init__(self, seconds: float, ca_bundle: str | None = None) -> None:
        self.seconds = seconds
        self.ca_bundle = ca_bundle
        self._context: ssl.SSLContext | None = None

    def context(self) -> ssl.SSLContext:
        if self._context is None:
            self._context = ssl.create_default_context(cafile=self.ca_bundle or get_cert_path(True))
        return self._context

    def __call__(self, request: Any, **kwargs: Any) -> AWSResponse | None:
        url = urllib.parse.urlsplit(request.url)
        host = url.hostname or ""
        if url.scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(host):
            return None  # botocore sends it through the proxy
        if url.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                host, url.port, timeout=self.seconds, context=self.context()
            )
        else:
            conn = http.client.HTTPConnection(host, url.port, timeout=self.seconds)
        target = (url.path or "/") + (f"?{url.query}" if url.query else "")
        headers = {k: v.decode("latin-1") if isinstance(v, bytes) else str(v) for k, v in request.headers.items()}
        body = request.body
        if hasattr(body, "read"):
            body = body.read()
        if isinstance(body, str):
            body = body.encode("utf-8")
        try:
            answer = exchange(conn, request.method, target, headers, self.seconds, MAX_ANSWER_BYTES, body)
        except DeadlineExceeded as e:
            if e.sent:
                raise ReadTimeoutError(endpoint_url=request.url, error=str(e)) from None
            raise ConnectTimeoutError(endpoint_url=request.url, error=str(e)) from None
        except BodyTooLarge as e:
            raise ReadTimeoutError(endpoint_url=request.url, error=str(e)) from None
        except (OSError, http.client.HTTPException) as e:
            if getattr(e, "sent_request", True):  # it may have been stored: never resent
                raise ConnectionClosedError(endpoint_url=request.url, error=str(e)) from None
            raise EndpointConnectionError(endpoint_url=request.url, error=str(e)) from None
        answer_headers: Any = dict(answer.headers.items())  # AWSResponse keeps any mapping as a HeadersDict
        return AWSResponse(request.url, answer.status, answer_headers, _Raw(answer.body))
