#!/bin/bash
# Real OTLP receivers for the tests (tests/exporters/otlp/test_otlp_victoria_e2e.py), unpacked, not installed.
#
# Debian's prometheus packages (bookworm 2.42, trixie 2.53, sid 3.5) are all built without Prometheus's OTLP
# receiver. Debian's victoria-metrics package has one (/opentelemetry/v1/metrics, with Prometheus's naming under
# -opentelemetry.usePrometheusNaming) from version 1.9x on; bookworm ships 1.79, so this script fetches the unstable
# (sid) package with apt-get through a private list of sources that names the machine's own Debian archive (the
# machine's apt configuration is not changed, nothing is installed) and unpacks only the server binary. It needs
# libzstd1, which bookworm has.
#
#   scripts/otlp-receivers.sh DIR      -> DIR/victoria-metrics (nothing is done when it is there already)
set -euo pipefail
dest=${1:?usage: $0 DIR}
[ -x "$dest/victoria-metrics" ] && exit 0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$dest"
# the machine's own Debian archive (the first URI of its sources that ends in /debian), with the sid suite
mirror=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)\/\{0,1\}[[:space:]]*$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
[ -n "$mirror" ] || mirror=$(sed -n 's/^deb[[:space:]]\{1,\}\([^[:space:]]*\/debian\)\/\{0,1\}[[:space:]].*/\1/p' /etc/apt/sources.list 2>/dev/null | head -n1)
[ -n "$mirror" ] || { echo "otlp-receivers: no Debian archive in this machine's apt sources" >&2; exit 1; }
echo "deb $mirror sid main" > "$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o "APT::Sandbox::User=root" -qq)
apt-get "${apt_opts[@]}" update
(cd "$work" && apt-get "${apt_opts[@]}" download victoria-metrics)
dpkg-deb -x "$work"/victoria-metrics_*.deb "$work/root"
install -m 0755 "$work/root/usr/bin/victoria-metrics" "$dest/victoria-metrics"
"$dest/victoria-metrics" -version
