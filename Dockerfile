# neuron-monitor image: the daemon and the exporters (Prometheus, CloudWatch, OTLP: neuron-monitor-otlp needs nothing
# more), for the DaemonSets in deploy/kubernetes/ and deploy/kubernetes-otlp/ or for
#   docker run --privileged -v /proc:/host/proc:ro -v /sys:/host/sys:ro -v /dev:/host/dev \
#     neuron-monitor:0.1.0 neuron-monitor --root /host
# or, as AWS's image is started (daemon | exporter in one container, HTTPS when given a certificate):
#   docker run --privileged -p 8000:8000 neuron-monitor:0.1.0 /opt/bin/entrypoint.sh --port 8000
# Build: docker build -t neuron-monitor:0.1.0 .
# Build stage: a C compiler builds the compiled helper (neuron_monitor/_native.c); the build fails if it is missing,
# so no image runs the pure-Python twins by accident (on a simulated trn2.48xlarge the daemon costs 3.8x its input
# floor on the twins against 2.4-2.7x with the helper, docs/performance.md). The compiler stays in this stage.
FROM python:3.11-slim AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py MANIFEST.in README.md ./
COPY dashboards/neuron-monitor.json ./dashboards/
COPY neuron_monitor ./neuron_monitor
# pip and setuptools leave the virtualenv once it is built (24 MB the commands never import; the base image keeps
# its own pip). Size: docs/running.md, "Image size".
RUN python -m venv /opt/neuron-monitor \
 && /opt/neuron-monitor/bin/pip install --no-cache-dir ".[k8s]" \
 && /opt/neuron-monitor/bin/python -c "import neuron_monitor._native as n; print('compiled helper:', n.__file__)" \
 && /opt/neuron-monitor/bin/python -m pip uninstall --yes --quiet pip setuptools

# Final stage: the virtualenv (package, dependencies, compiled helper), no compiler.
FROM python:3.11-slim
COPY --from=build /opt/neuron-monitor /opt/neuron-monitor
COPY configs/monitor.conf /etc/neuron-monitor/monitor.conf
# AWS's entrypoint, same flags: a DaemonSet made for public.ecr.aws/neuron/neuron-monitor (e.g. the CloudWatch
# observability add-on's) runs this image with only the image changed. See docs/migrating-from-aws.md.
COPY deploy/image/entrypoint.sh /opt/bin/entrypoint.sh
ENV PATH=/opt/neuron-monitor/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
# Unprivileged by default; the DaemonSet runs the daemon container as root only because the kubelet's
# pod-resources socket requires it (see docs/running.md).
USER 65534:65534
EXPOSE 8000
CMD ["neuron-monitor", "--config-file", "/etc/neuron-monitor/monitor.conf", "--root", "/host"]
