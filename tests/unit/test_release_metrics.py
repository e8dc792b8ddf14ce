"""The SLO gate's figures: PromQL built for a release, and Prometheus' answers read."""

from __future__ import annotations

import math

import pytest

from shared.errors import UnavailableError
from shared.prometheus import InvalidQueryError, Sample, base_url, parse_vector
from shared.serving.canary import ReleaseFigures
from shared.serving.release_metrics import (
    count_query,
    release_selector,
    release_stats,
    scalar_value,
    summary_p99_query,
)


def _vector(*values: str, labels: dict[str, str] | None = None) -> dict[str, object]:
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": labels or {}, "value": [1764331200.5, value]} for value in values]}}


def test_a_release_is_selected_by_namespace_model_and_release_labels():
    assert release_selector("serving", "toy-lm", "r-0123") == \
        '{namespace="serving",model="toy-lm",release="r-0123"}'


def test_a_name_that_could_break_out_of_the_selector_is_refused():
    with pytest.raises(ValueError, match="release"):
        release_selector("serving", "toy-lm", 'r"} or vector(1) #')


def test_counts_sum_increase_over_the_release_pods():
    selector = release_selector("serving", "m", "r1")
    assert count_query("nv_inference_request_failure", selector, 300) == \
        'sum(increase(nv_inference_request_failure' + selector + '[300s]))'


def test_the_p99_takes_the_largest_pod_quantile_in_milliseconds():
    selector = release_selector("serving", "m", "r1")
    assert summary_p99_query(selector) == (
        'max(nv_inference_request_summary_us{namespace="serving",model="m",release="r1",'
        'quantile="0.99"}) / 1000')


def test_a_window_under_a_second_is_refused():
    with pytest.raises(ValueError, match="window_seconds"):
        count_query("x", "{}", 0)


def test_prometheus_values_are_read_from_their_strings_nan_included():
    [sample] = parse_vector(_vector("NaN"), "q")
    assert math.isnan(sample.value)
    assert scalar_value([sample]) is None
    assert [s.value for s in parse_vector(_vector("3", "+Inf"), "q")] == [3.0, math.inf]


def test_an_empty_vector_has_no_value():
    assert parse_vector(_vector(), "q") == []
    assert scalar_value([]) is None


def test_a_scalar_answer_is_one_unlabelled_sample():
    body = {"status": "success", "data": {"resultType": "scalar", "result": [1.5, "7"]}}
    assert parse_vector(body, "q") == [Sample(metric={}, timestamp=1.5, value=7.0)]


def test_a_range_vector_answer_is_a_fault_of_the_query():
    body = {"status": "success", "data": {"resultType": "matrix", "result": []}}
    with pytest.raises(InvalidQueryError, match="matrix"):
        parse_vector(body, "x[5m]")


def test_an_answer_that_is_not_prometheus_is_retried():
    with pytest.raises(UnavailableError):
        parse_vector("<html>bad gateway</html>", "q")
    with pytest.raises(UnavailableError):
        parse_vector({"status": "success", "data": {"resultType": "vector",
                                                    "result": [{"metric": {}}]}}, "q")


def test_an_unaggregated_answer_is_refused_rather_than_half_read():
    two = parse_vector(_vector("1", "2"), "q")
    with pytest.raises(ValueError, match="one aggregated sample"):
        scalar_value(two)


class Answers:
    """Prometheus as a table of query → answer; records what was asked."""

    def __init__(self, answers: dict[str, dict[str, object]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def __call__(self, promql: str) -> list[Sample]:
        self.asked.append(promql)
        for fragment, body in self.answers.items():
            if fragment in promql:
                return parse_vector(body, promql)
        return []


def test_error_rate_is_failures_over_successes_plus_failures():
    prom = Answers({"request_success": _vector("90"), "request_failure": _vector("10"),
                    "request_summary_us": _vector("42.5"),
                    "compute_infer_summary_us": _vector("30.25")})
    stats = release_stats(prom, "serving", "toy-lm", "r1", 120)
    assert stats == ReleaseFigures(requests=100.0, failures=10.0, error_rate=0.1, p99_ms=42.5,
                                   compute_p99_ms=30.25)


def test_a_release_without_requests_has_no_rate_and_no_latency():
    prom = Answers({})
    assert release_stats(prom, "serving", "toy-lm", "r1", 120) == ReleaseFigures(
        requests=0.0, failures=0.0, error_rate=None, p99_ms=None)
    assert len(prom.asked) == 2  # no latency query without requests


def test_a_summary_without_observations_in_its_window_gives_no_p99():
    # Triton's summary answers NaN once its sliding window holds no success.
    prom = Answers({"request_success": _vector("5"), "summary_us": _vector("NaN")})
    stats = release_stats(prom, "serving", "toy-lm", "r1", 120)
    assert (stats.requests, stats.error_rate, stats.p99_ms) == (5.0, 0.0, None)


def test_only_failures_give_a_full_error_rate_and_no_p99():
    prom = Answers({"request_failure": _vector("2")})
    stats = release_stats(prom, "serving", "toy-lm", "r1", 120)
    assert (stats.requests, stats.error_rate, stats.p99_ms) == (2.0, 1.0, None)


def test_the_override_url_is_queried_anonymously():
    assert base_url({"ACCELOPS_PROMETHEUS_URL": "http://127.0.0.1:9/",
                     "ACCELOPS_PROJECT": "acme"}) == ("http://127.0.0.1:9", False)


def test_without_override_the_project_managed_prometheus_is_queried_with_credentials():
    assert base_url({"ACCELOPS_PROJECT": "acme"}) == (
        "https://monitoring.googleapis.com/v1/projects/acme/location/global/prometheus", True)


def test_without_project_or_override_there_is_nowhere_to_ask():
    from shared.errors import ConfigError
    with pytest.raises(ConfigError, match="ACCELOPS_PROJECT"):
        base_url({})
    with pytest.raises(ConfigError, match="http"):
        base_url({"ACCELOPS_PROMETHEUS_URL": "127.0.0.1:9090"})
