"""The report page of one load test, alone or against a baseline.

The page puts first what decides whether to trust the numbers: anything that makes a
comparison misleading (the same test twice, different servers, models or
accelerators, a test that mixed models) is a warning at the top, then what the run
was, then its results (:mod:`shared.metrics.loadtest.report_tables`), the charts with what
their short labels stand for, and Locust's tables. The dashboard adds a link back to
the list and a baseline picker: a plain GET form, since the page runs no script.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from shared.metrics._html import DASH, _e, back_link, instant, minute, page, seconds
from shared.metrics.chart_size import HEIGHT_PX, WIDTH_PX
from shared.metrics.loadtest.model import BaselineChoice, Baselines
from shared.metrics.loadtest.report_tables import (
    failures_table,
    requests_table,
    results_table,
    run_table,
)

if TYPE_CHECKING:
    from shared.metrics.loadtest.report_data import Report, TestData

__all__ = ["ALT", "NO_BASELINE", "report_page"]

#: The baseline picker's value for "no baseline" (the dashboard's ``compare=none``; no
#: ``compare`` at all means the default baseline).
NO_BASELINE = "none"

ALT = {
    "latency": "Latency p50, p90 and p99 of successful requests (ms) over time",
    "ttft": "Time to first token p50, p90 and p99 of streamed requests (ms) over time",
    "tpot": "Time per output token p50, p90 and p99 of streamed requests (ms) over time",
    "throughput": "Successful and all requests per second, and those meeting every SLO "
                  "(goodput), over time",
    "errors": "Failures per bucket and error rate (%) over time",
    "tokens": "Output tokens/s over time",
    "users": "Users over time",
}


def _per_test(title: str, report: Report, table: Callable[[TestData], str]) -> str:
    """A section with ``table`` of the test, and of the baseline when comparing."""
    if report.baseline is None:
        return f"<h2>{_e(title)}</h2>{table(report.data)}"
    return (f"<h2>{_e(title)}</h2>"
            f"<h3>Test <code>{_e(report.data.test_id)}</code></h3>{table(report.data)}"
            f"<h3>Baseline <code>{_e(report.baseline.test_id)}</code></h3>"
            f"{table(report.baseline)}")


# --- warnings, the baseline picker, the charts ---------------------------------------

def _warnings(report: Report) -> str:
    comparison = report.comparison
    if comparison is not None:
        found = list(comparison.warnings)
    elif report.test.mixed_models:
        found = [f"{report.test.test_id} sent requests to several models "
                 f"({report.test.models_seen}): its numbers mix them"]
    else:
        found = []
    return "".join(f'<p class="warning"><strong>Warning:</strong> {_e(w)}</p>'
                   for w in found)


def _notes(report: Report) -> str:
    return "".join(f'<p class="note"><strong>Note:</strong> {_e(n)}</p>' for n in report.notes)


def _option(choice: BaselineChoice, chosen: str | None, default: str | None) -> str:
    text = (f"{choice.test_id} — {choice.model_name or DASH}, {choice.server or DASH}, "
            f"{minute(choice.started)}")
    if choice.test_id == default:
        text += " (previous run of the same model and server)"
    selected = " selected" if choice.test_id == chosen else ""
    return f'<option value="{_e(choice.test_id)}"{selected}>{_e(text)}</option>'


def _baseline_form(report: Report, baselines: Baselines | None, action: str) -> str:
    """A GET form reloading ``action`` with ``compare`` set to the baseline picked: tests of
    the same model and server first, then the others; the current baseline selected."""
    chosen = report.other.test_id if report.other is not None else None
    default = baselines.default if baselines is not None else None
    choices = [c for c in (baselines.choices if baselines is not None else ())
               if c.test_id != report.test.test_id]
    other = report.other
    if other is not None and other.test_id not in {c.test_id for c in choices}:
        choices.insert(0, BaselineChoice(other.test_id, other.model_name, other.server,
                                         other.started, alike=False))
    none = " selected" if chosen is None else ""
    groups = [f'<option value="{NO_BASELINE}"{none}>none</option>']
    for label, alike in (("Same model and server", True), ("Other tests", False)):
        options = "".join(_option(c, chosen, default) for c in choices if c.alike == alike)
        if options:
            groups.append(f'<optgroup label="{label}">{options}</optgroup>')
    return (f'<form class="baseline" method="get" action="{_e(action)}">'
            '<label for="compare">Compare with</label>'
            f'<select id="compare" name="compare">{"".join(groups)}</select>'
            '<button type="submit">Compare</button></form>')


def _legend_note(report: Report) -> str:
    """Which test each chart label stands for (the charts carry short labels only)."""
    tests = [report.data] + ([report.baseline] if report.baseline is not None else [])
    named = [f"“{_e(run.label)}” is <code>{_e(data.test_id)}</code>"
             for run, data in zip(report.runs, tests, strict=True)
             if run.label != data.test_id]
    return f"<p class=meta>In the charts, {' and '.join(named)}.</p>" if named else ""


def _chart_meta(report: Report) -> str:
    unit = report.per
    tests = [report.data] + ([report.baseline] if report.baseline is not None else [])
    text = (f"Charts per {unit}; time axis in seconds since each test's start. The "
            f"throughput and output tokens charts leave out the partial first and last "
            f"{unit}s, which the test covered only partly.")
    for data in tests:
        if data.series and all(p.partial for p in data.series):
            text += (f" Every {unit} of {data.test_id} is partial (a short test): its "
                     "charts show them anyway, as hollow markers.")
    if report.comparison is not None:
        text += " Change is the test against the baseline."
    return f"<p class=meta>{_e(text)}</p>"


def _figures(report: Report, chart_srcs: Mapping[str, str]) -> str:
    ids = " and ".join([report.test.test_id]
                       + ([report.other.test_id] if report.other is not None else []))
    figures = "".join(
        f'<figure><img src="{_e(src)}" alt="{_e(ALT.get(name, name))} for {_e(ids)}" '
        f'width="{WIDTH_PX}" height="{HEIGHT_PX}"></figure>'
        for name, src in chart_srcs.items())
    which = "these tests" if report.other is not None else "this test"
    if "ttft" not in chart_srcs:
        figures += ("<p>Time to first token and time per output token: not streamed (no "
                    f"request of {which} streamed its response).</p>")
    elif "tpot" not in chart_srcs:
        figures += ("<p>Time per output token: no streamed request of "
                    f"{which} generated two tokens or more.</p>")
    return f"<section class=charts>{figures}</section>"


def report_page(report: Report, chart_srcs: Mapping[str, str], *,
                index_href: str | None = None, baselines: Baselines | None = None,
                form_action: str | None = None) -> str:
    """The page of ``report`` with one image per entry of ``chart_srcs`` (name → src).

    ``index_href`` links back to the test list; ``form_action`` adds a form that
    reloads the page with another of ``baselines``, whose default (the previous test of
    the same model and server) the page names as such when it is the baseline shown.
    """
    default_baseline = baselines.default if baselines is not None else None
    test, other = report.test, report.other
    ids = [test.test_id] + ([other.test_id] if other is not None else [])
    heading = "Load test " + " vs ".join(f"<code>{_e(i)}</code>" for i in ids)
    meta = f"Started {_e(instant(test.started))}, ran {_e(seconds(test.duration_s))}."
    if other is not None and other.test_id == default_baseline:
        meta += " Compared with the previous run of the same model and server."
    elif other is not None:
        meta += f" Compared with <code>{_e(other.test_id)}</code>."
    body = [back_link(index_href), f"<h1>{heading}</h1>", f"<p class=meta>{meta}</p>",
            _warnings(report), _notes(report)]
    if form_action is not None:
        body.append(_baseline_form(report, baselines, form_action))
    body += ["<h2>Run</h2>", run_table(test, other),
             "<h2>Results</h2>", results_table(test, other),
             "<h2>Charts</h2>", _chart_meta(report), _legend_note(report),
             _figures(report, chart_srcs),
             _per_test("Requests by name", report, requests_table),
             _per_test("Failures", report, lambda data: failures_table(data.failures))]
    return page("Load test " + " vs ".join(ids), "".join(body))
