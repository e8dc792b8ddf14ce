"""A load test's report: the data it needs, its HTML page, and the files on disk.

Reading and rendering are separate so the CLI and the dashboard show the same page:
:func:`build_report` does every read (through a :class:`MetricsSource`),
:func:`render_html` and :func:`render_index_html` are pure string building, and only
:func:`write_report` touches the file system. Where the charts live is the caller's
choice (``chart_src``): relative PNG file names for the offline report, chart URLs
for the dashboard.

Every value that comes from data (test ids, model and server names) is HTML-escaped:
test ids and model names are chosen by whoever ran the load test.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from shared.metrics import charts
from shared.metrics._html import index_page, report_page
from shared.metrics.charts import CHART_NAMES, Run
from shared.metrics.model import MetricsSource, SeriesPoint, TestComparison, TestSummary

__all__ = [
    "CHART_NAMES",
    "PER_SECOND_BELOW_S",
    "Report",
    "Resolution",
    "build_report",
    "chart_png",
    "render_html",
    "render_index_html",
    "report_dir_name",
    "save_report",
    "write_report",
]

Resolution = Literal["second", "minute"]

#: Tests shorter than this are charted per second; longer ones per minute, which keeps
#: an hour-long test to 60 points instead of 3,600.
PER_SECOND_BELOW_S = 600.0


@dataclass(frozen=True)
class Report:
    """Everything a report shows: one test, or a test and the baseline it is compared with.

    Both tests' series have the same resolution (``per``) so their charts overlay.
    """

    test: TestSummary
    series: tuple[SeriesPoint, ...]
    per: Resolution
    comparison: TestComparison | None = None
    other_series: tuple[SeriesPoint, ...] = ()

    @property
    def other(self) -> TestSummary | None:
        """The baseline test, if the report compares."""
        return self.comparison.other if self.comparison is not None else None

    @property
    def runs(self) -> tuple[Run, ...]:
        """The series to chart: the test first, then its baseline."""
        runs = [Run(self.test.test_id, self.series)]
        if self.other is not None:
            runs.append(Run(self.other.test_id, self.other_series))
        return tuple(runs)


def build_report(source: MetricsSource, test_id: str, compare: str | None = None) -> Report:
    """Read a test (and its baseline ``compare``) from ``source``.

    The series are per second when the test, or either test when comparing, lasted
    under ten minutes; otherwise per minute.

    Raises:
        NotFoundError: either test id is unknown to the source.
        TransientError: the source is unreachable.
    """
    test = source.summary(test_id)
    other = source.summary(compare) if compare is not None else None
    durations = [test.duration_s] + ([other.duration_s] if other is not None else [])
    per: Resolution = "second" if min(durations) < PER_SECOND_BELOW_S else "minute"
    series = tuple(source.series(test_id, per=per))
    if other is None:
        return Report(test=test, series=series, per=per)
    return Report(test=test, series=series, per=per,
                  comparison=TestComparison(test=test, other=other),
                  other_series=tuple(source.series(other.test_id, per=per)))


def chart_png(report: Report, name: str) -> bytes:
    """The report's chart ``name`` (one of :data:`CHART_NAMES`) as PNG bytes.

    Raises:
        KeyError: ``name`` is not a chart.
    """
    return charts.render(name, report.runs)


def render_html(report: Report, chart_src: Callable[[str], str]) -> str:
    """The report as one self-contained HTML page (inline CSS, no scripts).

    ``chart_src(name)`` gives the ``src`` of each chart image, for each of
    :data:`CHART_NAMES`.
    """
    return report_page(report.test, report.other, report.per,
                       {name: chart_src(name) for name in CHART_NAMES})


def render_index_html(tests: list[TestSummary], link: Callable[[str], str]) -> str:
    """A page listing ``tests`` (newest first), each test id linking to ``link(test_id)``."""
    return index_page(tests, link)


def write_report(source: MetricsSource, test_id: str, out_dir: Path,
                 compare: str | None = None) -> Path:
    """Write ``index.html`` and one PNG per chart into ``out_dir``; return the index path.

    The page refers to the charts by relative file name, so the directory can be
    moved, zipped or opened offline. The HTML is written last: a directory without
    ``index.html`` is an interrupted report.

    Raises:
        NotFoundError: either test id is unknown to the source.
        TransientError: the source is unreachable.
        OSError: the directory or a file cannot be written.
    """
    return save_report(build_report(source, test_id, compare), out_dir)


def save_report(report: Report, out_dir: Path) -> Path:
    """Write an already built report as :func:`write_report` does; return the index path.

    Raises OSError when the directory or a file cannot be written.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in CHART_NAMES:
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
