"""What the exporter answers: ``/metrics``, ``/healthz``, ``/readyz``, ``/livez``, the landing page ``/`` and
``/dashboard.json``.

``/docs/`` lists the docs the package ships and ``/docs/<name>.md`` serves one as text (the landing page links them,
so the link works from an installed package without network). ``/metrics`` serves the collector's body in the
negotiated format (Prometheus text 0.0.4 or OpenMetrics), gzip when ``Accept-Encoding`` allows it (q-values
honoured). ``/healthz`` (liveness) answers ``200 ok`` while a fresh report is served and stdin is open, else ``503``
with the reason; ``/readyz`` (readiness) answers ``503`` until the first report that lists a Neuron device has been
applied, ``200`` from then on (as Neuron Observer's /readyz waits for its first collection cycle), except while the
newest report's health verdicts are blind: ``503`` naming the driver signals the daemon did not find, or found and
could not read, and on which devices (rules ``signal_missing``, ``signal_unreadable``; docs/health.md). ``/livez``
answers ``200 alive`` whenever the exporter's loop answers at all, fresh reports or not: the liveness of the
exporter itself (the DaemonSet restarts the exporter on it, and the daemon on ``/healthz``). The three need no
credentials, so kubelet probes work with basic auth on. With basic auth users configured, every other path needs
them: a cached verdict answers at once, anything else waits for the bounded bcrypt pool (``auth``, ``server``).

Content negotiation for ``/metrics`` (``gzip_accepted``, ``exposition_format``): ``Accept-Encoding`` follows RFC
9110 section 12.5.3: a coding is acceptable when listed with a q-value above 0; ``gzip;q=0`` refuses it, ``*``
stands for every coding not listed, and names are case-insensitive. Unknown codings (``nogzip``, ``br``) are not
gzip. The format comes from ``Accept``. Answers are memoised per header value (scrapers send the same one every
time), in a bounded table.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from functools import lru_cache
from pathlib import Path
from typing import Any

from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from neuron_monitor.exporters.prometheus.auth import BasicAuth
from neuron_monitor.exporters.prometheus.collector import ExporterCollector
from neuron_monitor.exporters.prometheus.landing import CSP, landing_page
from neuron_monitor.exporters.prometheus.server import HTTPFront, Request, Response, plain
from neuron_monitor.exporters.prometheus.state import ExporterState
from neuron_monitor.util.inputfile import InputFileError, read_regular
from neuron_monitor.util.sanitize import html_text

DASHBOARD_MAX_BYTES = 8 * 1024 * 1024  # the dashboard JSON is about 100 KiB
log = logging.getLogger("neuron_monitor.exporters.prometheus.app")


def dashboard_file() -> Path:
    """The Grafana dashboard: the copy a wheel ships in this package (setup.py puts it there), else the source
    tree's ``dashboards/neuron-monitor.json`` (a checkout, an editable install)."""
    here = Path(__file__).resolve().parent
    packaged = here / "dashboard.json"
    return packaged if packaged.is_file() else here.parents[2] / "dashboards" / "neuron-monitor.json"


DASHBOARD = dashboard_file()
DOCS_PREFIX = "/docs/"
DOC_MAX_BYTES = 1024 * 1024  # the longest doc is about 100 KB
DOCS_CSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"


def shipped_docs() -> dict[str, Path]:
    """The docs the package ships (``docs/*.md`` among ``neuron-monitor-install``'s files: a wheel carries them,
    a checkout has them), by file name."""
    from neuron_monitor.install.files import shipped_files, shipped_root

    root = shipped_root()
    return {
        name.split("/", 1)[1]: root / name
        for name in shipped_files()
        if name.startswith("docs/") and name.count("/") == 1 and name.endswith(".md")
    }


UNAUTHORIZED = plain(401, "Unauthorized", **{"WWW-Authenticate": 'Basic realm="neuron-monitor-prometheus"'})


class ExporterApp:
    """The request handler of ``server.HTTPFront``: routes, auth, and the /metrics body."""

    def __init__(
        self,
        exporter: ExporterCollector,
        others: list[Collector] | None = None,
        auth: BasicAuth | None = None,
        headers: dict[str, str] | None = None,
        dashboard: Path | None = DASHBOARD,
        docs: bool = True,
    ) -> None:
        self.exporter = exporter
        self.others = others or []
        self.state: ExporterState = exporter.state
        self.auth = auth or BasicAuth({})
        self.headers = headers or {}
        self.dashboard = dashboard if dashboard is not None and dashboard.is_file() else None
        self.front: HTTPFront | None = None  # set by the front that serves this app (for the bcrypt pool)
        self.docs = shipped_docs() if docs else {}  # page name -> file (docs/*.md the package ships)

    def __call__(self, request: Request) -> Response | Coroutine[Any, Any, Response]:
        path = request.path
        if path == "/healthz":
            view = self.exporter.serving_view()
            return plain(200 if view.healthy else 503, view.reason)
        if path == "/livez":
            return plain(200, "alive")
        if path == "/readyz":
            if self.state.blind:
                return plain(
                    503, f"not ready: {self.state.blind} (health verdicts unknown; run neuron-monitor --check)"
                )
            if self.state.ready:
                return plain(200, "ready")
            return plain(503, "not ready: no report with Neuron device data applied yet")
        if path not in ("/metrics", "/", "/dashboard.json") and not path.startswith(DOCS_PREFIX):
            return plain(404, "Not Found")
        verdict = self.auth.cached(request.headers.get("authorization"))
        if verdict is None:
            return self._after_bcrypt(request)
        return self._route(request) if verdict else UNAUTHORIZED

    async def _after_bcrypt(self, request: Request) -> Response:
        header = request.headers.get("authorization")
        if self.front is None:
            ok: bool | None = self.auth.verify(header)
        else:
            ok = await self.front.run_auth(lambda: self.auth.verify(header))
        if ok is None:
            return plain(503, "authentication busy, retry", **{"Retry-After": "1"})
        return self._route(request) if ok else UNAUTHORIZED

    def _route(self, request: Request) -> Response:
        path = request.path
        if path == "/metrics":
            return self.metrics(request)
        if path == "/dashboard.json" and self.dashboard is not None:
            try:  # on the loop: never a blocking open (a FIFO put in its place), never a huge read
                return Response(200, read_regular(self.dashboard, DASHBOARD_MAX_BYTES), "application/json")
            except InputFileError as e:
                log.warning("cannot serve the dashboard: %s", e)
                return plain(404, "Not Found")
        if path == "/":
            page = landing_page(self.exporter, self.dashboard is not None, bool(self.docs))
            return Response(200, page.encode("utf-8"), "text/html; charset=utf-8", {"Content-Security-Policy": CSP})
        if path.startswith(DOCS_PREFIX):
            return self._doc(path[len(DOCS_PREFIX) :])
        return plain(404, "Not Found")

    def _doc(self, name: str) -> Response:
        """``/docs/``: the list of the shipped docs; ``/docs/<name>.md``: one of them as text (only names the
        package ships are served: the request names a page, never a path)."""
        if not name:
            items = "".join(f'<li><a href="{html_text(n)}">{html_text(n)}</a></li>' for n in sorted(self.docs))
            page = (
                '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>neuron-monitor docs</title>'
                f"</head><body><h1>neuron-monitor documentation</h1><ul>{items}</ul></body></html>\n"
            )
            return Response(
                200, page.encode("utf-8"), "text/html; charset=utf-8", {"Content-Security-Policy": DOCS_CSP}
            )
        file = self.docs.get(name)
        if file is None:
            return plain(404, "Not Found")
        try:
            text = read_regular(file, DOC_MAX_BYTES)
        except InputFileError as e:
            log.warning("cannot serve %s: %s", name, e)
            return plain(404, "Not Found")
        return Response(200, text, "text/plain; charset=utf-8", {"X-Content-Type-Options": "nosniff"})

    def metrics(self, request: Request) -> Response:
        openmetrics, content_type = exposition_format(request.headers.get("accept"))
        gzipped = gzip_accepted(request.headers.get("accept-encoding"))
        body = self.exporter.body_parts(self.others, openmetrics, gzipped)
        headers = {"Vary": "Accept-Encoding"}
        if gzipped:
            headers["Content-Encoding"] = "gzip"
        return Response(200, body, content_type, headers)


OPENMETRICS = "application/openmetrics-text"
_MEMO_LIMIT = 512  # longer header values are parsed every time, not memoised


def _q(params: list[str]) -> float:
    """The q-value among a coding's parameters (1 when absent, 0 when unreadable)."""
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                q = float(value.strip())
            except ValueError:
                return 0.0
            return q if 0.0 <= q <= 1.0 else 0.0
    return 1.0


def gzip_accepted(header: str | None) -> bool:
    """Whether an ``Accept-Encoding`` header value allows a gzip-coded response."""
    if not header:
        return False
    return _gzip_cached(header) if len(header) <= _MEMO_LIMIT else _gzip_accepted(header)


@lru_cache(maxsize=128)
def _gzip_cached(header: str) -> bool:
    return _gzip_accepted(header)


def _gzip_accepted(header: str) -> bool:
    explicit: float | None = None
    star: float | None = None
    for item in header.split(","):
        coding, *params = item.split(";")
        coding = coding.strip().lower()
        if coding in ("gzip", "x-gzip"):
            q = _q(params)
            explicit = q if explicit is None else max(explicit, q)
        elif coding == "*":
            star = _q(params)
    if explicit is not None:
        return explicit > 0
    return star is not None and star > 0


def exposition_format(accept: str | None) -> tuple[bool, str]:
    """(OpenMetrics?, Content-Type) for an ``Accept`` header, as client_python negotiates it."""
    accept = accept or ""
    return _format_cached(accept) if len(accept) <= _MEMO_LIMIT else _format(accept)


@lru_cache(maxsize=128)
def _format_cached(accept: str) -> tuple[bool, str]:
    return _format(accept)


def _format(accept: str) -> tuple[bool, str]:
    _, content_type = choose_encoder(accept)
    return content_type.startswith(OPENMETRICS), content_type
