"""One Chromium, one dashboard and one set of offline reports for the whole browser suite.

The dashboard is the real app (``create_app``) behind a real HTTP server on
127.0.0.1, reading the real metrics views on a bqemulator that the records of
:mod:`tests.browser.load_tests` reached through ``ingest_metrics``. The offline
reports are ``write_report`` directories of the same data, opened by file URL.
Everything is package-scoped: the environment the ingest path and the views read is
restored when the browser tests end. Pages stay open once visited, so each check
reads the same live page.

A query on the emulator takes about a second and a compared page with its four charts
asks 20, so the pages read the views through :class:`ReadOnce`: each distinct question
goes to the real views once, and the data does not change during the suite.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, sync_playwright
from werkzeug.serving import make_server

from services.dashboard.app import create_app
from shared.errors import NotFoundError
from shared.metrics.loadtest.report import write_report
from shared.metrics.loadtest.views import BigQueryMetrics
from shared.metrics.names import Names
from tests.bigquery_fixtures import PROJECT, metrics_dataset
from tests.browser import load_tests
from tests.browser.pages import Visit, launch, visit

REPO = Path(__file__).resolve().parents[2]
#: Offline reports written for the suite: directory name → (test, baseline).
REPORTS = {
    "hostile": (load_tests.HOSTILE, None),
    "hostile-vs-baseline": (load_tests.HOSTILE, load_tests.BASELINE),
}


def _call(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    return repr((name, args, sorted(kwargs.items())))


class ReadOnce:
    """A metrics source that asks ``source`` each distinct question once (a not-found
    answer included) and repeats the answer; safe to share between threads.

    Any method of the source is answered this way, so the dashboard may ask new
    questions without this class changing. :meth:`learn_summaries` answers
    ``summary(test_id)`` from the rows of ``recent_tests()`` (the same view, the same
    columns), which saves a query per test.
    """

    def __init__(self, source: BigQueryMetrics) -> None:
        self._source = source
        # Keyed by the call's repr: arguments may be lists, and dataclasses and strings
        # repr the same whenever they are equal.
        self._answers: dict[str, Any] = {}
        self._lock = threading.Lock()

    def learn_summaries(self) -> None:
        for summary in self.recent_tests():
            self._answers[_call("summary", (summary.test_id,), {})] = summary

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._source, name)
        if not callable(method):
            return method

        def once(*args: Any, **kwargs: Any) -> Any:
            key = _call(name, args, kwargs)
            with self._lock:
                if key not in self._answers:
                    try:
                        self._answers[key] = method(*args, **kwargs)
                    except NotFoundError as exc:
                        self._answers[key] = exc
                answer = self._answers[key]
            if isinstance(answer, NotFoundError):
                raise NotFoundError(answer.message)
            return copy.copy(answer)  # a list the caller may change

        return once


@pytest.fixture(scope="package")
def metrics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReadOnce]:
    """The views of a dataset holding every test in :mod:`tests.browser.load_tests`."""
    with metrics_dataset(tmp_path_factory.mktemp("browser-bq")) as dataset:
        load_tests.ingest_load_tests(dataset.ingest)
        load_tests.ingest_pool_actions(dataset.ingest)
        load_tests.ingest_job_events(dataset.ingest)
        source = ReadOnce(BigQueryMetrics(Names.of(PROJECT, dataset.config)))
        source.learn_summaries()
        yield source


@pytest.fixture(scope="package")
def dashboard(metrics: ReadOnce) -> Iterator[str]:
    """The dashboard's base URL (``http://127.0.0.1:PORT``)."""
    server = make_server("127.0.0.1", 0, create_app(lambda: metrics), threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="dashboard", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)


@pytest.fixture(scope="package")
def reports(metrics: ReadOnce, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with one offline report per entry of :data:`REPORTS`."""
    root = tmp_path_factory.mktemp("reports")
    for name, (test_id, compare) in REPORTS.items():
        write_report(metrics, test_id, root / name, compare=compare)
    return root


@pytest.fixture(scope="package")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    with sync_playwright() as playwright:
        context = launch(playwright, tmp_path_factory.mktemp("chromium-profile"))
        try:
            yield context
        finally:
            context.close()


@dataclass(frozen=True)
class Site:
    """Where the pages are: the dashboard's base URL and the reports' directory."""

    dashboard: str
    reports: Path

    def url(self, where: str) -> str:
        """``/path`` on the dashboard, or ``report:NAME`` for an offline report."""
        if where.startswith("report:"):
            return (self.reports / where.removeprefix("report:") / "index.html").as_uri()
        return self.dashboard + where


@pytest.fixture(scope="package")
def site(dashboard: str, reports: Path) -> Site:
    return Site(dashboard, reports)


@pytest.fixture(scope="package")
def opened(chromium: BrowserContext, site: Site) -> Callable[[str, int], Visit]:
    """``opened(where, width)``: the page at ``where`` (see :meth:`Site.url`) in a window
    ``width`` px wide, opened on first use and kept open for the other checks."""
    visits: dict[tuple[str, int], Visit] = {}

    def open_page(where: str, width: int) -> Visit:
        key = (where, width)
        if key not in visits:
            visits[key] = visit(chromium, site.url(where), width)
        return visits[key]

    return open_page
