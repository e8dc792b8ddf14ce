"""A load test's report: the data it needs, its HTML page, and the files on disk.

Reading and rendering are separate so the CLI and the dashboard show the same page:
:func:`build_report` does every read (through a :class:`MetricsSource`),
:func:`render_html` and :func:`render_index_html` are pure string building, and only
:func:`write_report` touches the file system. Where the charts live is the caller's
choice (``chart_src``): relative PNG file names for the offline report, chart URLs
for the dashboard.

The pages themselves are built in ``_report_page`` (with ``_report_tables``),
``_index_page`` and ``_html`` (the shared shell, CSS and error page). Every value that
comes from data (test ids, model and server names, request names, failure messages)
is HTML-escaped: whoever ran the load test chose them, and servers wrote the messages.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from shared.errors import NotFoundError
from shared.metrics._html import error_page
from shared.metrics.loadtest import charts
from shared.metrics.loadtest.charts import CHART_NAMES
from shared.metrics.loadtest.index_page import index_page
from shared.metrics.loadtest.model import (
    Baselines,
    MetricsSource,
    TestSummary,
)
from shared.metrics.loadtest.report_data import Report, Resolution, TestData
from shared.metrics.loadtest.report_page import NO_BASELINE, report_page

__all__ = [
    "CHART_NAMES",
    "NO_BASELINE",
    "PER_SECOND_BELOW_S",
    "build_report",
    "chart_png",
    "charts_shown",
    "render_error_html",
    "render_html",
    "render_index_html",
    "report_dir_name",
    "save_report",
    "write_html",
    "write_report",
]


#: Tests shorter than this are charted per second; longer ones per minute, which keeps
#: an hour-long test to 60 points instead of 3,600.
PER_SECOND_BELOW_S = 600.0


def build_report(source: MetricsSource, test_id: str, compare: str | None = None) -> Report:
    """Read a test (and its baseline ``compare``) from ``source``: one query per view.

    The series are per second when the test, or either test when comparing, lasted
    under ten minutes; otherwise per minute.

    Raises:
        NotFoundError: either test id is unknown to the source.
        TransientError: the source is unreachable.
    """
    ids = [test_id] + ([compare] if compare is not None else [])
    summaries = source.summaries(ids)
    for wanted in ids:
        if wanted not in summaries:
            raise NotFoundError(f"no load test {wanted!r}")
    per: Resolution = ("second" if min(summaries[i].duration_s for i in ids) < PER_SECOND_BELOW_S
                       else "minute")
    series = source.series(ids, per=per)
    stats = source.request_stats(ids)
    failures = source.failures(ids)

    def data(wanted: str) -> TestData:
        return TestData(summaries[wanted], tuple(series.get(wanted, ())),
                        tuple(stats.get(wanted, ())), tuple(failures.get(wanted, ())))

    return Report(data(test_id), per, data(compare) if compare is not None else None)


def chart_png(report: Report, name: str) -> bytes:
    """The report's chart ``name`` (one of :data:`CHART_NAMES`) as PNG bytes.

    Raises:
        KeyError: ``name`` is not a chart.
    """
    return charts.render(name, report.runs)


def charts_shown(report: Report) -> tuple[str, ...]:
    """The charts the report's page shows, in order: every one of :data:`CHART_NAMES`
    but time to first token when neither test streamed a response, and time per output
    token when neither streamed one of two tokens or more."""
    tests = [report.data] + ([report.baseline] if report.baseline is not None else [])

    def measured(field: str) -> bool:
        return any(getattr(t.summary, field) is not None
                   or any(getattr(p, field) is not None for p in t.series) for t in tests)

    hidden = {name for name, field in (("ttft", "ttft_p50_ms"), ("tpot", "tpot_p50_ms"))
              if not measured(field)}
    return tuple(name for name in CHART_NAMES if name not in hidden)


def render_html(report: Report, chart_src: Callable[[str], str], *,
                index_href: str | None = None, baselines: Baselines | None = None,
                form_action: str | None = None) -> str:
    """The report as one self-contained HTML page (inline CSS, no scripts).

    ``chart_src(name)`` gives the ``src`` of each chart image, for each of
    :func:`charts_shown`. The rest is for the dashboard (the offline report has none
    of it): ``index_href`` adds a link back to the test list; ``form_action`` adds a
    GET form submitting there (field ``compare``: a test id, or :data:`NO_BASELINE`)
    that picks a baseline among ``baselines.choices`` (the same model and server
    first; the current baseline selected). When the baseline shown is
    ``baselines.default``, the page says it is the previous run of the same model and
    server.
    """
    return report_page(report, {name: chart_src(name) for name in charts_shown(report)},
                       index_href=index_href, baselines=baselines, form_action=form_action)


def render_index_html(tests: Sequence[TestSummary], link: Callable[[str], str],
                      sort: str | None = None, direction: str | None = None,
                      savings_href: str | None = None, jobs_href: str | None = None) -> str:
    """A page listing ``tests``, each test id linking to ``link(test_id)``.

    Sorted by column ``sort`` in ``direction`` (``asc`` or ``desc``): each column header
    links to ``?sort=<column>&dir=<direction>``. Unknown columns mean newest first;
    an unknown direction, the column's usual one (largest numbers first). With
    ``savings_href``, the page links to what off-hours node-pool removal saved; with
    ``jobs_href``, to how jobs fared.
    """
    return index_page(tests, link, sort, direction, savings_href, jobs_href)


def render_error_html(status: int, title: str, reason: str,
                      index_href: str | None = "/") -> str:
    """An HTTP error's page in the reports' style (see :func:`shared.metrics._html.error_page`):
    ``reason`` is shown as text, with a link back to ``index_href``."""
    return error_page(status, title, reason, index_href)


def write_html(source: MetricsSource, test_id: str, out_root: Path,
               compare: str | None = None, notes: Sequence[str] = ()) -> Path:
    """:func:`write_report` into ``out_root``'s directory for the test (and its
    baseline), named by :func:`report_dir_name`."""
    return write_report(source, test_id, out_root / report_dir_name(test_id, compare),
                        compare=compare, notes=notes)


def write_report(source: MetricsSource, test_id: str, out_dir: Path,
                 compare: str | None = None, notes: Sequence[str] = ()) -> Path:
    """Write ``index.html`` and one PNG per chart into ``out_dir``; return the index path.
    ``notes``: lines shown under the title (see ``Report.notes``).

    The page refers to the charts by relative file name, so the directory can be
    moved, zipped or opened offline. The HTML is written last: a directory without
    ``index.html`` is an interrupted report.

    Raises:
        NotFoundError: either test id is unknown to the source.
        TransientError: the source is unreachable.
        OSError: the directory or a file cannot be written.
    """
    return save_report(replace(build_report(source, test_id, compare), notes=tuple(notes)),
                       out_dir)


def save_report(report: Report, out_dir: Path) -> Path:
    """Write an already built report as :func:`write_report` does; return the index path.

    Raises OSError when the directory or a file cannot be written.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in charts_shown(report):
        (out_dir / f"{name}.png").write_bytes(chart_png(report, name))
    index = out_dir / "index.html"
    index.write_text(render_html(report, lambda name: f"{name}.png"), encoding="utf-8")
    return index


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_PART_MAX = 64


def report_dir_name(test_id: str, compare: str | None = None) -> str:
    """A directory name for a report: ``A`` or ``A-vs-B``, at most 132 characters.

    Only ``[A-Za-z0-9._-]`` is kept and a name never starts with ``.`` or ``-``. An id
    that had to be changed (``run:1`` → ``run_1-<hash>``) or shortened carries a hash of
    the original, so two different ids never share a directory.
    """
    parts = [_safe_part(test_id)] + ([_safe_part(compare)] if compare is not None else [])
    return "-vs-".join(parts)


def _safe_part(test_id: str) -> str:
    cleaned = _UNSAFE.sub("_", test_id).lstrip(".-")
    if cleaned and cleaned == test_id and len(cleaned) <= _PART_MAX:
        return cleaned
    digest = hashlib.sha256(test_id.encode()).hexdigest()[:8]
    return f"{cleaned[:_PART_MAX - 9] or 'test'}-{digest}"
