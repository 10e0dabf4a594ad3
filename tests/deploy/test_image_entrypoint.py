"""The image's AWS-compatible entrypoint is wired: copied to /opt/bin/entrypoint.sh, executable, kept in the build
context, pointing at the interpreter the image installs, and accepting every flag AWS's DaemonSets pass."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "deploy" / "image" / "entrypoint.sh"


def test_dockerfile_installs_the_entrypoint_where_aws_has_it() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert re.search(r"^COPY deploy/image/entrypoint\.sh /opt/bin/entrypoint\.sh$", text, re.M)
    venv = re.search(r"python -m venv (\S+)", text).group(1)
    assert f"{venv}/bin/python" in SCRIPT.read_text()  # the default interpreter is the image's virtualenv
    assert os.access(SCRIPT, os.X_OK)
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    assert ignore.index("!deploy/image/entrypoint.sh") > ignore.index("deploy")  # re-included after the exclusion


def test_every_flag_aws_passes_is_accepted() -> None:
    """The flags of the CloudWatch add-on's NeuronMonitor resource and of the Neuron SDK DaemonSet."""
    help_text = subprocess.run(
        [str(SCRIPT), "--help"],
        env=dict(os.environ, NEURON_MONITOR_PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    for flag in ("--port", "--neuron-monitor-config", "--cert-file", "--key-file"):
        assert flag in help_text
