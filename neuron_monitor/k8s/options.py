"""Command-line options for pod attribution under DRA, shared by the daemon and ``python3 -m ...k8s.pod_info``.

Reads: the parsed options and the environment (``NODE_NAME``, set from the pod's ``spec.nodeName`` by the DRA
overlay; ``KUBERNETES_SERVICE_HOST``/``PORT``, set in every pod). Returns: the ``DraDirectory`` to use, or None
when the API server is not to be read (``--k8s-api off``, or ``auto`` without a mounted service account token).
"""

from __future__ import annotations

import argparse
import os

from neuron_monitor.k8s.dra import NEURON_DRA_DRIVER, DraDirectory
from neuron_monitor.k8s.kubeapi import DEFAULT_CA_FILE, DEFAULT_TOKEN_FILE, KubeApi, KubeApiError, in_cluster_server


def add_dra_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--dra-driver``, ``--k8s-api``, ``--k8s-api-token-file``, ``--k8s-api-ca-file``, ``--node-name``."""
    p.add_argument(
        "--dra-driver",
        default=NEURON_DRA_DRIVER,
        metavar="NAME",
        help=f"DRA driver whose claims own Neuron devices (default {NEURON_DRA_DRIVER})",
    )
    p.add_argument(
        "--k8s-api",
        default="auto",
        metavar="auto|off|URL",
        help="API server for ResourceSlices/ResourceClaims (device index, LNC, pod UID of DRA claims): auto = "
        "in-cluster when a service account token is mounted (default), off, or a URL (http only to loopback)",
    )
    p.add_argument("--k8s-api-token-file", default=DEFAULT_TOKEN_FILE, metavar="FILE", help="bearer token file")
    p.add_argument("--k8s-api-ca-file", default=DEFAULT_CA_FILE, metavar="FILE", help="cluster CA bundle (https)")
    p.add_argument(
        "--node-name",
        default=os.environ.get("NODE_NAME", ""),
        metavar="NAME",
        help="this node's name, to list only its ResourceSlices (env NODE_NAME)",
    )


def dra_directory(args: argparse.Namespace, timeout: float = 5.0) -> DraDirectory | None:
    """The API-server view for these options; raises ``ValueError`` (one line) for an unusable ``--k8s-api``."""
    choice = (args.k8s_api or "auto").strip()
    if choice == "off":
        return None
    if choice == "auto":
        server = in_cluster_server()
        if server is None or not os.path.isfile(args.k8s_api_token_file):
            return None
    else:
        server = choice
    try:
        api = KubeApi(server, args.k8s_api_token_file or None, args.k8s_api_ca_file or None, timeout=timeout)
    except KubeApiError as e:
        raise ValueError(f"--k8s-api: {e}") from None
    return DraDirectory(api, args.dra_driver, args.node_name.strip())
