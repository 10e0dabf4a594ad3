"""The environment of a child process whose AWS credential chain can only ask an instance metadata service that
the test holds on loopback (one that accepts and never answers, for stops while start-up waits on it)."""

from __future__ import annotations

import os


def waiting_on_imds(port: int, **extra: str) -> dict[str, str]:
    """No config or credentials file; the metadata service at ``127.0.0.1:port``, asked once with a 600 s timeout;
    ``extra`` variables besides (e.g. ``AWS_REGION``)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "AWS_EC2_METADATA_SERVICE_ENDPOINT": f"http://127.0.0.1:{port}/",
        "AWS_METADATA_SERVICE_TIMEOUT": "600",
        "AWS_METADATA_SERVICE_NUM_ATTEMPTS": "1",
        **extra,
    }
