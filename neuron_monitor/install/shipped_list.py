"""What the package ships besides its code: paths relative to the source tree, a folder meaning every file below it.

Kept free of imports: setup.py reads this file (runpy) to copy these into a built package's ``_shipped/`` folder,
and MANIFEST.in lists the same paths for the sdist (tests/deploy/test_shipped.py checks the three agree).
"""

SHIPPED = (
    "configs",
    "systemd",
    "deploy/prometheus/neuron-monitor.rules.yml",
    "deploy/kubernetes",
    "deploy/kubernetes-dra",
    "deploy/kubernetes-dra-taint",
    "deploy/kubernetes-otlp",
    "deploy/kubernetes-aws-values",
    "deploy/image/entrypoint.sh",
    "dashboards/neuron-monitor.json",
    "dashboards/neuron-fleet.json",
    "dashboards/provisioning",
    "docs",
)
SKIPPED_SUFFIXES = (".py", ".pyc")
SKIPPED_PARTS = ("__pycache__",)
