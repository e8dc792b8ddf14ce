"""A Triton release's request counts, error rate and p99 latency, from Prometheus.

The figures come from the servers' own metrics, scraped by managed Prometheus from
every pod of the release (the PodMonitoring that :func:`shared.serving.triton.
render_triton` renders copies the pod's release label onto each series as
``release``). Triton's ``model`` label names the model (see ``triton.py`` for why it
is not mapped from the pod).

**Counts** over the window are ``increase()`` of Triton's per-request counters summed
over the release's pods: ``nv_inference_request_success`` and
``nv_inference_request_failure`` (every ``reason``). Prometheus extrapolates
``increase()`` to the window's ends, so a count is exact when the window covers the
series' start (the counters start at 0 when the model loads) and ends at a scrape,
and otherwise overstates by at most the share of one scrape interval; success and
failure come from the same scrapes, so the error rate is not skewed by it. Requests
Triton refuses before they reach the model (a malformed shape: HTTP 400) are counted
by neither counter.

**p99** is the request-duration summary's 0.99 quantile
(``nv_inference_request_summary_us``, kept with ``--metrics-config=summary_latencies=
true``), in milliseconds, the largest over the release's pods: a summary's quantiles
cannot be summed. It is Triton's own estimate (prometheus-cpp's CKMS, rank error 0.001)
over Triton's own sliding window (prometheus-cpp's default, 60 s in 5 age buckets), not
over ``window_seconds``, and covers successful requests only. Triton 24.08 keeps no
latency histogram (``nv_inference_first_response_histogram_ms`` came with r24.11, and
only for decoupled models), so ``histogram_quantile`` has nothing to read there.

**Compute p99** is the same for ``nv_inference_compute_infer_summary_us``: the time the
model itself ran for a request, without the time the request queued first. A canary at
5 % of the requests queues far less than the release serving the other 95 %, so its
request p99 flatters it; its compute p99 does not depend on the load it was given.

The builders and the parsing are pure; :func:`release_stats` only calls the query
function it is given (``shared.prometheus.query_function()`` in production).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from shared.prometheus import Sample, query_function
from shared.serving.canary import ReleaseFigures
from shared.serving.triton import TARGET_LABEL_RELEASE

__all__ = [
    "COMPUTE_SUMMARY",
    "FAILURE_COUNTER",
    "LATENCY_SUMMARY",
    "SUCCESS_COUNTER",
    "Query",
    "count_query",
    "prometheus_metrics",
    "release_selector",
    "release_stats",
    "scalar_value",
    "summary_p99_query",
]

SUCCESS_COUNTER = "nv_inference_request_success"
FAILURE_COUNTER = "nv_inference_request_failure"
LATENCY_SUMMARY = "nv_inference_request_summary_us"
# The time the model itself ran for a request, without the queue before it.
COMPUTE_SUMMARY = "nv_inference_compute_infer_summary_us"
QUANTILE = 0.99

Query = Callable[[str], Sequence[Sample]]


def _quote(value: str) -> str:
    """A PromQL double-quoted string."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


def release_selector(namespace: str, model: str, release: str) -> str:
    """``{namespace="...",model="...",release="..."}``. Raises ValueError for a value
    that is not a Kubernetes-style name (none of ours ever is)."""
    for what, value in (("namespace", namespace), ("model", model), ("release", release)):
        if not _NAME.match(value):
            raise ValueError(f"{what} {value!r} is not a name a series can carry")
    return (f"{{namespace={_quote(namespace)},model={_quote(model)},"
            f"{TARGET_LABEL_RELEASE}={_quote(release)}}}")


def _window(seconds: int) -> str:
    if seconds < 1:
        raise ValueError(f"window_seconds must be at least 1, not {seconds}")
    return f"{seconds}s"


def count_query(counter: str, selector: str, window_seconds: int) -> str:
    """Requests counted by ``counter`` over the window, summed over pods (and reasons)."""
    return f"sum(increase({counter}{selector}[{_window(window_seconds)}]))"


def summary_p99_query(selector: str, summary: str = LATENCY_SUMMARY) -> str:
    """The largest of the pods' own 0.99 quantiles of ``summary``, in milliseconds."""
    inner = selector[:-1] + f',quantile="{QUANTILE}"}}'
    return f"max({summary}{inner}) / 1000"


def scalar_value(samples: Sequence[Sample]) -> float | None:
    """The one value of an aggregated answer: None for an empty vector or NaN (no
    series, or nothing observed). Raises ValueError for more than one sample (the
    query was not aggregated)."""
    if not samples:
        return None
    if len(samples) > 1:
        raise ValueError(f"expected one aggregated sample, got {len(samples)}")
    value = samples[0].value
    return None if math.isnan(value) or math.isinf(value) else value


def release_stats(query: Query, namespace: str, model: str, release: str,
                  window_seconds: int) -> ReleaseFigures:
    """The release's counts, error rate and p99 over the last ``window_seconds``.

    Raises what ``query`` raises (``shared.prometheus``: UnavailableError and
    RateLimitedError are retried, InvalidQueryError is a fault here), ValueError for
    names that cannot be selectors.
    """
    selector = release_selector(namespace, model, release)
    successes = scalar_value(query(count_query(SUCCESS_COUNTER, selector,
                                               window_seconds))) or 0.0
    failures = scalar_value(query(count_query(FAILURE_COUNTER, selector,
                                              window_seconds))) or 0.0
    requests = successes + failures
    if requests <= 0:
        return ReleaseFigures(requests=0.0, failures=0.0, error_rate=None, p99_ms=None)
    p99 = scalar_value(query(summary_p99_query(selector)))
    compute = scalar_value(query(summary_p99_query(selector, COMPUTE_SUMMARY)))
    return ReleaseFigures(requests=requests, failures=failures,
                          error_rate=failures / requests, p99_ms=p99, compute_p99_ms=compute)


def prometheus_metrics(model: str, namespace: str,
                       query: Query | None = None) -> Callable[[str, float], ReleaseFigures]:
    """What the canary's gate reads: ``(release, window in seconds) → figures`` of one
    model's releases, from the servers' metrics in Prometheus (managed Prometheus, or
    ``ACCELOPS_PROMETHEUS_URL``). The window is rounded up to whole seconds."""
    ask = query or query_function()

    def figures(release: str, window_seconds: float) -> ReleaseFigures:
        return release_stats(ask, namespace, model, release, math.ceil(window_seconds))
    return figures
