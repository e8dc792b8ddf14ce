"""Locust's own aggregate read from its ``--json-file``, and the lines a report gets
where it disagrees with BigQuery's figures."""

from __future__ import annotations

import html
import json
import random
import re
import subprocess
import sys
from dataclasses import replace

import pytest

from shared.metrics.loadtest.locust_stats import (
    LocustAggregate,
    aggregate_notes,
    locust_aggregate,
    locust_percentile,
)
from shared.metrics.loadtest.report import write_report
from tests.fake_metrics import FakeSource, make_summary


def locusts_own_percentiles(histogram: dict[int, int], fractions: list[float]) -> list[int]:
    """Locust's function itself, in a subprocess: importing Locust monkey-patches the
    interpreter with gevent, which pytest's must not be."""
    code = ("import json, sys\n"
            "from locust.stats import calculate_response_time_percentile as f\n"
            "h, qs = json.load(sys.stdin)\n"
            "h = {int(k): v for k, v in h.items()}\n"
            "print(json.dumps([f(h, sum(h.values()), q) for q in qs]))\n")
    done = subprocess.run([sys.executable, "-c", code], input=json.dumps([histogram, fractions]),
                          capture_output=True, text=True, check=True, timeout=60)
    return list(json.loads(done.stdout))


def test_percentiles_are_read_from_the_histogram_exactly_as_locust_reads_them():
    rng = random.Random(5)
    histogram: dict[int, int] = {}
    for _ in range(2_000):
        millis = round(rng.lognormvariate(4.0, 0.8))
        histogram[millis] = histogram.get(millis, 0) + 1
    fractions = [0.5, 0.9, 0.95, 0.99, 0.999, 1.0]

    ours = [locust_percentile(histogram, sum(histogram.values()), q) for q in fractions]

    assert ours == locusts_own_percentiles(histogram, fractions)


def test_the_aggregate_merges_every_request_names_histogram_and_counts():
    entries = [
        {"name": "/a", "num_requests": 3, "num_failures": 1,
         "response_times": {"10": 1, "20": 2}},
        {"name": "/b", "num_requests": 2, "num_failures": 0, "response_times": {"20": 1,
                                                                                "300": 1}},
    ]

    aggregate = locust_aggregate(entries)

    assert (aggregate.requests, aggregate.failures) == (5, 1)
    # Merged: 10 ms once, 20 ms three times, 300 ms once.
    assert aggregate.percentiles == {"p50": 20.0, "p90": 300.0, "p99": 300.0}


def test_a_run_locust_counted_nothing_of_has_no_percentiles():
    assert locust_aggregate([]).percentiles == {"p50": None, "p90": None, "p99": None}


def test_a_percentile_off_by_more_than_five_percent_gets_a_line_naming_both_numbers():
    summary = replace(make_summary("run-a"), requests=100, p50_ms=40.0, p90_ms=50.0,
                      p99_ms=80.0)
    locust = LocustAggregate(100, 0, {"p50": 41.0, "p90": 50.0, "p99": 110.0})

    notes = aggregate_notes(locust, summary)

    assert len(notes) == 1
    assert notes[0].startswith("Locust's aggregate p99 is 110 ms, BigQuery's 80.0 ms")


def test_a_request_count_that_differs_is_said_with_both_counts():
    summary = replace(make_summary("run-a"), requests=100)
    locust = LocustAggregate(97, 0, {"p50": summary.p50_ms, "p90": summary.p90_ms,
                                     "p99": summary.p99_ms})

    assert aggregate_notes(locust, summary) == (
        "Locust counted 97 requests, BigQuery holds 100: the report's figures are "
        "BigQuery's.",)


@pytest.mark.parametrize("locust_p50", [38.1, 41.9])
def test_differences_within_five_percent_are_left_unsaid(locust_p50):
    summary = replace(make_summary("run-a"), requests=100, p50_ms=40.0)
    locust = LocustAggregate(100, 0, {"p50": locust_p50, "p90": summary.p90_ms,
                                      "p99": summary.p99_ms})

    assert aggregate_notes(locust, summary) == ()


def test_the_written_report_shows_each_note_escaped_above_the_run_table(tmp_path):
    summary = replace(make_summary("run-a"), p99_ms=80.0)
    source = FakeSource().add(summary)
    notes = aggregate_notes(LocustAggregate(summary.requests, 0, {
        "p50": summary.p50_ms, "p90": summary.p90_ms, "p99": 110.0}), summary)

    page = write_report(source, "run-a", tmp_path, notes=notes).read_text()

    found = re.findall(r'<p class="note"><strong>Note:</strong> (.*?)</p>', page)
    assert found == [html.escape(notes[0], quote=True)]
    assert "aggregate p99 is 110 ms, BigQuery&#x27;s 80.0 ms" in found[0]
    assert page.index('class="note"') < page.index("<h2>Run</h2>")


def test_a_report_without_notes_has_none(tmp_path):
    page = write_report(FakeSource().add(make_summary("run-a")), "run-a", tmp_path).read_text()

    assert 'class="note"' not in page
