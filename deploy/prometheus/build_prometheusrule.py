"""Writes deploy/kubernetes/prometheusrule.yaml (a Prometheus Operator PrometheusRule) from the one rules file.

    python3 deploy/prometheus/build_prometheusrule.py           # regenerate
    python3 deploy/prometheus/build_prometheusrule.py --check   # exit 1 if the manifest is out of date

The rule groups are copied unchanged; a test checks that the manifest's groups equal the rules file's.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
RULES = HERE / "neuron-monitor.rules.yml"
MANIFEST = HERE.parent / "kubernetes" / "prometheusrule.yaml"
HEADER = (
    "# GENERATED from deploy/prometheus/neuron-monitor.rules.yml by deploy/prometheus/build_prometheusrule.py:\n"
    "# edit the rules file and rerun the script. What each alert means: docs/alerts.md.\n"
)


def manifest(rules: dict[str, Any]) -> dict[str, Any]:
    """The PrometheusRule object carrying ``rules``' groups."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "neuron-monitor",
            "namespace": "neuron-monitor",
            # release: kube-prometheus-stack's default ruleSelector (docs/alerts.md, "Installing")
            "labels": {
                "app.kubernetes.io/name": "neuron-monitor",
                "app.kubernetes.io/component": "alerting",
                "release": "kube-prometheus-stack",
            },
        },
        "spec": {"groups": rules["groups"]},
    }


class _Dumper(yaml.SafeDumper):
    """Writes strings that span lines (the longer PromQL expressions) as literal blocks, as a person would."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render() -> str:
    """The manifest's text, generated from the rules file."""
    rules = yaml.safe_load(RULES.read_text())
    body = yaml.dump(manifest(rules), Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)
    return HEADER + body


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not MANIFEST.exists() or MANIFEST.read_text() != text:
            sys.stderr.write(f"{MANIFEST} is out of date: run python3 {Path(__file__).relative_to(Path.cwd())}\n")
            return 1
        return 0
    MANIFEST.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
