"""The tables of a report page: the run, its results (with the change column), Locust's
requests by name, and the failures.

What they promise a reader:

* the change column never calls a worse test better. Each number has a direction:
  lower latency and error rate are better, higher success QPS and output tokens/s are
  better, and the rest describe the load, not the outcome (direction 0: never green or
  red). Total QPS is one of those: it counts failures, which often fail fast, so a
  test that breaks can "gain" QPS. Success QPS is the throughput outcome. Counts of
  requests and failures grow with the test's length: the error rate judges failures;
* the error rate changes in percentage points (``+47.80 pp``), which stay meaningful
  from a baseline of 0; other numbers in percent. A number that is unknown (no
  successful request, so no latency) is ``—``, and so is its change;
* latency is over successful requests only, time to first token, time per output
  token and inter-token latency over streamed ones, and the labels say so;
* goodput is shown beside QPS: the share of all requests that succeeded within every
  SLO given with the test (a failure is never good), and their rate. A test without
  SLOs says "no SLOs" rather than 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from shared.metrics._html import DASH, _e, count, decimal, instant, percent, scroll, seconds
from shared.metrics.loadtest.model import Failure, RequestStats, TestSummary

if TYPE_CHECKING:
    from shared.metrics.loadtest.report_data import TestData

__all__ = ["Direction", "Kind", "Verdict", "change", "failures_table", "requests_table",
           "results_table", "run_table"]

# +1: higher is better, -1: lower is better, 0: neither (load shape, not outcome).
Direction = Literal[1, -1, 0]
Verdict = Literal["good", "bad", "same"]
# "relative": percent of the baseline; "points": difference of two rates, in pp.
Kind = Literal["relative", "points"]


def change(before: float | None, after: float | None, kind: Kind,
           direction: Direction) -> tuple[str, Verdict]:
    """The change from ``before`` (baseline) to ``after`` (test) as text, and whether it
    is good, bad or neither for a number that is better in ``direction``."""
    if before is None or after is None:
        return DASH, "same"
    if kind == "points":
        text = f"{(after - before) * 100:+.2f} pp"
        sign = 0 if text in ("+0.00 pp", "-0.00 pp") else (1 if after > before else -1)
    elif before == 0:
        text, sign = ("0.0 %", 0) if after == 0 else (
            ("up from 0", 1) if after > 0 else ("down from 0", -1))
    else:
        ratio = (after - before) / abs(before)
        text = f"{ratio * 100:+.1f} %"
        sign = 0 if text in ("+0.0 %", "-0.0 %") else (1 if ratio > 0 else -1)
    if sign == 0 or direction == 0:
        return text, "same"
    return text, "good" if sign == direction else "bad"


# --- the results table ----------------------------------------------------------------

@dataclass(frozen=True)
class _Result:
    label: str
    field: str
    show: Callable[[float | int | None], str]
    kind: Kind
    direction: Direction


def _ms_or_not_streamed(value: float | int | None) -> str:
    return "not streamed" if value is None else decimal(value)


def _no_slos(show: Callable[[float | int | None], str]) -> Callable[[float | int | None], str]:
    return lambda value: "no SLOs" if value is None else show(value)


def _decimal(value: float | int | None) -> str:
    return decimal(value)


def _rate(value: float | int | None) -> str:
    return percent(value)


def _count(value: float | int | None) -> str:
    return count(None if value is None else int(value))


_OK = "successful requests (ms)"
_RESULTS = (
    _Result("Requests", "requests", _count, "relative", 0),
    _Result("Failures", "errors", _count, "relative", 0),
    _Result("Error rate", "error_rate", _rate, "points", -1),
    _Result("Success QPS (successful requests/s)", "success_qps", _decimal, "relative", 1),
    _Result("QPS, all requests (failures included)", "qps", _decimal, "relative", 0),
    _Result("Goodput, share of all requests meeting every SLO", "goodput",
            _no_slos(percent), "points", 1),
    _Result("Goodput QPS (requests/s meeting every SLO)", "goodput_qps",
            _no_slos(decimal), "relative", 1),
    _Result(f"p50 latency, {_OK}", "p50_ms", _decimal, "relative", -1),
    _Result(f"p90 latency, {_OK}", "p90_ms", _decimal, "relative", -1),
    _Result(f"p99 latency, {_OK}", "p99_ms", _decimal, "relative", -1),
    _Result(f"Mean latency, {_OK}", "mean_ms", _decimal, "relative", -1),
    _Result(f"Max latency, {_OK}", "max_ms", _decimal, "relative", -1),
    _Result("Time to first token p50, streamed requests (ms)", "ttft_p50_ms",
            _ms_or_not_streamed, "relative", -1),
    _Result("Time to first token p90, streamed requests (ms)", "ttft_p90_ms",
            _ms_or_not_streamed, "relative", -1),
    _Result("Time to first token p99, streamed requests (ms)", "ttft_p99_ms",
            _ms_or_not_streamed, "relative", -1),
    _Result("Time per output token p50, streamed requests (ms)", "tpot_p50_ms",
            _ms_or_not_streamed, "relative", -1),
    _Result("Time per output token p90, streamed requests (ms)", "tpot_p90_ms",
            _ms_or_not_streamed, "relative", -1),
    _Result("Time per output token p99, streamed requests (ms)", "tpot_p99_ms",
            _ms_or_not_streamed, "relative", -1),
    _Result("Inter-token latency p50, streamed requests (ms)", "itl_p50_ms",
            _ms_or_not_streamed, "relative", -1),
    _Result("Inter-token latency p90, streamed requests (ms)", "itl_p90_ms",
            _ms_or_not_streamed, "relative", -1),
    _Result("Inter-token latency p99, streamed requests (ms)", "itl_p99_ms",
            _ms_or_not_streamed, "relative", -1),
    _Result("Output tokens/s", "tokens_per_s", _decimal, "relative", 1),
    _Result("Input tokens", "input_tokens", _count, "relative", 0),
    _Result("Output tokens", "output_tokens", _count, "relative", 0),
)


def results_table(test: TestSummary, other: TestSummary | None) -> str:
    """What the test measured; with ``other``, the baseline's numbers and the change."""
    head = "<th></th><th class=num>Test</th>"
    if other is not None:
        head += "<th class=num>Baseline</th><th class=num>Change</th>"
    rows = []
    for row in _RESULTS:
        mine = getattr(test, row.field)
        cells = f"<th>{_e(row.label)}</th><td class=num>{_e(row.show(mine))}</td>"
        if other is not None:
            theirs = getattr(other, row.field)
            text, verdict = change(theirs, mine, row.kind, row.direction)
            cells += (f"<td class=num>{_e(row.show(theirs))}</td>"
                      f'<td class="num {verdict}">{_e(text)}</td>')
        rows.append(f"<tr>{cells}</tr>")
    return scroll(f'<table class="summary"><thead><tr>{head}</tr></thead>'
                  f"<tbody>{''.join(rows)}</tbody></table>")


# --- the run table --------------------------------------------------------------------

def _model(s: TestSummary) -> str:
    name = s.model_name or DASH
    return f"{name} (inferred from requests)" if s.model_inferred else name


def _planned(s: TestSummary) -> str:
    return seconds(s.run_time_s) if s.run_time_s is not None else "until stopped"


def _spawn(s: TestSummary) -> str:
    return DASH if s.spawn_rate is None else f"{s.spawn_rate:g} users/s"


def _finished(s: TestSummary) -> str:
    return "yes" if s.finished else "no stop recorded (running, interrupted or no run record)"


def _slos(s: TestSummary) -> str:
    given = [f"{name} ≤ {value:,g} ms" for name, value in (
        ("TTFT", s.slo_ttft_ms), ("TPOT", s.slo_tpot_ms), ("latency", s.slo_latency_ms))
        if value is not None]
    return ", ".join(given) if given else "none"


# label, how to show it, whether two tests that differ in it are highlighted
_RUN: tuple[tuple[str, Callable[[TestSummary], str], bool], ...] = (
    ("Test id", lambda s: s.test_id, False),
    ("Model", _model, True),
    ("Models requested", lambda s: s.models_seen or DASH, True),
    ("Server", lambda s: s.server or DASH, True),
    ("Accelerator", lambda s: s.accelerator or DASH, True),
    ("Host", lambda s: s.host or DASH, True),
    ("Users", lambda s: count(s.users), True),
    ("Spawn rate", _spawn, True),
    ("Planned run time", _planned, True),
    ("Started", lambda s: instant(s.started), False),
    ("Duration", lambda s: seconds(s.duration_s), False),
    ("Finished", _finished, False),
    ("SLOs", _slos, True),
    ("Locust version", lambda s: s.locust_version or DASH, True),
    ("Load generator revision", lambda s: s.loadgen_revision or DASH, True),
)


def run_table(test: TestSummary, other: TestSummary | None) -> str:
    """What the test was (and the baseline was), differences in setup highlighted."""
    head = "<th></th><th>Test</th>" + ("<th>Baseline</th>" if other is not None else "")
    rows = []
    for label, show, highlight in _RUN:
        cells = f"<th>{_e(label)}</th><td class=text>{_e(show(test))}</td>"
        differs = False
        if other is not None:
            cells += f"<td class=text>{_e(show(other))}</td>"
            differs = highlight and show(test) != show(other)
        rows.append(f"<tr{' class=differs' if differs else ''}>{cells}</tr>")
    return scroll(f'<table class="run"><thead><tr>{head}</tr></thead>'
                  f"<tbody>{''.join(rows)}</tbody></table>")


# --- requests by name and failures ---------------------------------------------------

_REQUEST_HEAD = ("<tr><th>Type</th><th>Name</th><th class=num>Requests</th>"
                 "<th class=num>Failures</th><th class=num>Median (ms)</th>"
                 "<th class=num>p90 (ms)</th><th class=num>p99 (ms)</th>"
                 "<th class=num>Max (ms)</th><th class=num>Average (ms)</th>"
                 "<th class=num>Average size (bytes)</th><th class=num>Output tokens</th></tr>")


def _request_row(stats: RequestStats, total: bool = False) -> str:
    numbers = (count(stats.requests), count(stats.failures), decimal(stats.p50_ms),
               decimal(stats.p90_ms), decimal(stats.p99_ms), decimal(stats.max_ms),
               decimal(stats.mean_ms), decimal(stats.mean_bytes, 0), count(stats.output_tokens))
    cells = (f"<td class=text>{_e(stats.request_type)}</td>"
             f"<td class=name>{_e(stats.request_name)}</td>"
             + "".join(f"<td class=num>{_e(n)}</td>" for n in numbers))
    return f"<tr{' class=total' if total else ''}>{cells}</tr>"


def requests_table(data: TestData) -> str:
    """Locust's statistics: one row per request type and name, then all requests."""
    s = data.summary
    # Locust's "Aggregated" row, from the summary (sizes are not summed there).
    total = RequestStats(s.test_id, "", "All requests", s.requests, s.errors, s.p50_ms,
                         s.p90_ms, s.p99_ms, s.max_ms, s.mean_ms, None, s.output_tokens)
    rows = "".join(_request_row(r) for r in data.requests) + _request_row(total, total=True)
    return scroll(f'<table class="requests"><thead>{_REQUEST_HEAD}</thead>'
                  f"<tbody>{rows}</tbody></table>")


def failures_table(failures: Sequence[Failure]) -> str:
    """Each distinct failure and how often it happened; "No failures." without any."""
    if not failures:
        return "<p>No failures.</p>"
    rows = "".join(
        f"<tr><td class=text>{_e(f.request_type)}</td><td class=name>{_e(f.request_name)}</td>"
        f"<td class=msg>{_e(f.message)}</td><td class=num>{_e(count(f.occurrences))}</td></tr>"
        for f in failures)
    return scroll('<table class="failures"><thead><tr><th>Type</th><th>Name</th>'
                  "<th>Message</th><th class=num>Occurrences</th></tr></thead>"
                  f"<tbody>{rows}</tbody></table>")
