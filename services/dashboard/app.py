"""The load-test dashboard: the CLI's report pages and charts, served from Cloud Run,
what off-hours node-pool removal saved (``/savings``) and how jobs fared (``/jobs``:
queue wait, provisioning, run time, chip-hours used and idle), both linked from the
test list.

It renders with :mod:`shared.metrics.loadtest.report`, so a page here and an ``accelops
report`` directory are the same HTML; only the chart ``src`` differs (chart routes
instead of PNG files).

Cold start stays short: the metrics source (a BigQuery client) is created on the first
request that needs it, once per process, and matplotlib is imported on the first
chart; ``/healthz`` needs neither. Errors map to statuses by their domain type:
``NotFoundError`` 404, ``TransientError`` 503 with ``Retry-After``; a malformed test id
is refused (400) before the source is asked.

A page costs one query per view it shows, and its charts none: reports are built once
per (test, baseline) and kept (:mod:`services.dashboard.cache`), charts drawn from the
kept report. Without a ``compare`` argument a test is compared with the previous run of
the same model and server (``test_comparison``); ``compare=none`` shows it alone; any
test id picks that baseline.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from flask import Flask, Response, request, url_for

from services.dashboard.cache import FINISHED_SECONDS, LIVE_SECONDS, TtlCache, settled
from services.dashboard.jobs import add_jobs_routes
from services.dashboard.savings import add_savings_routes
from services.dashboard.window import BadWindow
from shared.errors import ConfigError, NotFoundError, TransientError
from shared.log import get_logger
from shared.metrics.loadtest.model import Baselines, MetricsSource
from shared.metrics.loadtest.report import (
    CHART_NAMES,
    build_report,
    chart_png,
    render_error_html,
    render_html,
    render_index_html,
)
from shared.metrics.loadtest.report_data import Report
from shared.metrics.loadtest.views import BigQueryMetrics
from shared.metrics.savings.views import BigQuerySavings, SavingsSource
from shared.metrics.usage.views import BigQueryJobs, JobsSource

__all__ = ["RECENT_TESTS", "TEST_ID", "create_app"]

TEST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
RECENT_TESTS = 50

log = get_logger("accelops.dashboard")

# Load tests keep reporting while they run, so pages are cached briefly (as long as
# the server keeps a live report); a chart is cached as long as the page that shows it.
_PAGE_CACHE = f"private, max-age={LIVE_SECONDS:.0f}"
_CHART_CACHE = _PAGE_CACHE
_INDEX_CACHE = "no-cache"
_RETRY_AFTER_S = "10"
# Pages carry inline CSS and no scripts; images come from this origin only, and the
# baseline picker (a GET form) submits to it.
_CSP = ("default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


_Source = TypeVar("_Source")


class _InvalidTestId(ValueError):
    """A test id in the URL that no load test can have."""


class _LazySource(Generic[_Source]):
    """The source, created by ``factory`` on first use and shared by every thread.

    A factory that fails is tried again on the next request rather than cached.
    """

    def __init__(self, factory: Callable[[], _Source]) -> None:
        self._factory = factory
        self._source: _Source | None = None
        self._lock = threading.Lock()

    def get(self) -> _Source:
        if self._source is None:
            with self._lock:
                if self._source is None:
                    self._source = self._factory()
        return self._source


def _bigquery_source() -> MetricsSource:
    return BigQueryMetrics.from_env()


def _bigquery_savings() -> SavingsSource:
    return BigQuerySavings.from_env()


def _bigquery_jobs() -> JobsSource:
    return BigQueryJobs.from_env()


def _checked(test_id: str, what: str = "test id") -> str:
    if not TEST_ID.fullmatch(test_id):
        raise _InvalidTestId(f"{what} {test_id!r} is not a load test id: 1-128 characters "
                             "from A-Z a-z 0-9 . _ : -, starting with a letter or digit")
    return test_id


_NO_BASELINE = "none"


def _compare_arg() -> str | None:
    """The ``compare`` argument: a checked test id, ``none``, or None when absent."""
    compare = request.args.get("compare", "").strip()
    if not compare or compare == _NO_BASELINE:
        return compare or None
    return _checked(compare, "compare")


def _error_page(status: int, title: str, reason: str) -> Response:
    response = Response(render_error_html(status, title, reason, index_href="/"), status=status,
                        mimetype="text/html")
    response.headers["Cache-Control"] = "no-store"
    return response


class _KeptReport:
    """A built report and its charts, each drawn once, on first request."""

    def __init__(self, report: Report) -> None:
        self.report = report
        self._charts: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def chart(self, name: str) -> bytes:
        with self._lock:
            if name not in self._charts:
                self._charts[name] = chart_png(self.report, name)
            return self._charts[name]

    @property
    def lifetime(self) -> float:
        report = self.report
        tests = [report.test] + ([report.other] if report.other is not None else [])
        return FINISHED_SECONDS if settled(tests) else LIVE_SECONDS


def create_app(source_factory: Callable[[], MetricsSource] | None = None,
               clock: Callable[[], float] = time.monotonic,
               savings_factory: Callable[[], SavingsSource] | None = None,
               jobs_factory: Callable[[], JobsSource] | None = None) -> Flask:
    """The dashboard app; ``source_factory``, ``savings_factory`` and ``jobs_factory``
    default to the BigQuery views from the env, ``clock`` (seconds) times how long built
    reports are kept."""
    app = Flask(__name__)
    source = _LazySource(source_factory or _bigquery_source)
    reports: TtlCache[_KeptReport] = TtlCache(clock)
    baselines: TtlCache[Baselines] = TtlCache(clock)

    def baselines_of(test_id: str) -> Baselines:
        return baselines.get(test_id, lambda: source.get().baselines(test_id),
                             lambda _: LIVE_SECONDS)

    def report_of(test_id: str, compare: str | None) -> _KeptReport:
        return reports.get((test_id, compare),
                           lambda: _KeptReport(build_report(source.get(), test_id, compare)),
                           lambda kept: kept.lifetime)

    @app.get("/healthz")
    def healthz() -> Response:
        return Response("ok\n", mimetype="text/plain", headers={"Cache-Control": "no-store"})

    @app.get("/favicon.ico")
    def favicon() -> Response:
        # Browsers ask every origin for an icon; "none" without logging a 404 for it.
        return Response(status=204, headers={"Cache-Control": "public, max-age=86400"})

    @app.get("/")
    def index() -> Response:
        tests = source.get().recent_tests(RECENT_TESTS)
        page = render_index_html(tests, lambda test_id: url_for("test_page", test_id=test_id),
                                 sort=request.args.get("sort"), direction=request.args.get("dir"),
                                 savings_href=url_for("savings"), jobs_href=url_for("jobs"))
        return Response(page, mimetype="text/html", headers={"Cache-Control": _INDEX_CACHE})

    @app.get("/tests/<test_id>")
    def test_page(test_id: str) -> Response:
        test_id, asked = _checked(test_id), _compare_arg()
        offered = baselines_of(test_id)
        # No choice made: the previous run of the same model and server, if any.
        compare = offered.default if asked is None else (
            None if asked == _NO_BASELINE else asked)
        report = report_of(test_id, compare).report
        chart_compare = compare or _NO_BASELINE
        page = render_html(
            report, lambda name: url_for("chart", test_id=test_id, name=name,
                                         compare=chart_compare),
            index_href=url_for("index"), baselines=offered,
            form_action=url_for("test_page", test_id=test_id))
        return Response(page, mimetype="text/html", headers={"Cache-Control": _PAGE_CACHE})

    @app.get("/tests/<test_id>/charts/<name>.png")
    def chart(test_id: str, name: str) -> Response:
        test_id, asked = _checked(test_id), _compare_arg()
        if name not in CHART_NAMES:
            return _error_page(404, "Not Found",
                               f"no chart {name!r}; charts: {', '.join(CHART_NAMES)}")
        compare = None if asked in (None, _NO_BASELINE) else asked
        png = report_of(test_id, compare).chart(name)
        return Response(png, mimetype="image/png", headers={"Cache-Control": _CHART_CACHE})

    add_savings_routes(app, _LazySource(savings_factory or _bigquery_savings).get, clock)
    add_jobs_routes(app, _LazySource(jobs_factory or _bigquery_jobs).get, clock)

    @app.errorhandler(BadWindow)
    def bad_window(exc: BadWindow) -> Response:
        return _error_page(400, "Bad Request", str(exc))

    @app.errorhandler(_InvalidTestId)
    def invalid_test_id(exc: _InvalidTestId) -> Response:
        return _error_page(400, "Bad Request", str(exc))

    @app.errorhandler(NotFoundError)
    def not_found(exc: NotFoundError) -> Response:
        return _error_page(404, "Not Found", exc.message)

    @app.errorhandler(ConfigError)
    def misconfigured(exc: ConfigError) -> Response:
        # The deployment's fault, not the visitor's: say what to set, log it loudly.
        log.error("dashboard misconfigured", path=request.path, **exc.as_fields())
        return _error_page(500, "Internal Server Error",
                           f"the dashboard is misconfigured: {exc.message}")

    @app.errorhandler(TransientError)
    def unavailable(exc: TransientError) -> Response:
        log.warning("metrics source unavailable", path=request.path, **exc.as_fields())
        response = _error_page(503, "Service Unavailable",
                               f"the metrics store did not answer: {exc.message}")
        response.headers["Retry-After"] = _RETRY_AFTER_S
        return response

    @app.after_request
    def security_headers(response: Response) -> Response:
        response.headers.setdefault("Content-Security-Policy", _CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        return response

    return app

