"""A release's own metrics, end to end: real tritonserver pods serve an uploaded model,
the sandbox's Prometheus scrapes them as managed collection would, and
``release_stats`` reads the counts and p99 back through the Prometheus adapter.

The truth is the test's own: how many requests it sent, which of them failed, and each
one's latency measured at the client.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from sandbox.cluster.objects import loopback_url
from sandbox.inference.toy_lm_model import model_files
from sandbox.supervisor.runner import Sandbox
from shared import kube, storage
from shared.cli import main as cli
from shared.kube import SERVICES
from shared.prometheus import InvalidQueryError, Sample, instant_query
from shared.serving.ledger import load_ledger
from shared.serving.release_metrics import (
    SUCCESS_COUNTER,
    release_selector,
    release_stats,
)
from tests.e2e.conftest import wait_for

pytestmark = pytest.mark.e2e

SANDBOX_PARTS = {"serving"}
NAMESPACE = "serving"
MODEL = "toy-lm"
READY_SECONDS = 90.0
GOOD, BAD, REFUSED = 60, 6, 3
# Covers the series' whole life (the pod is minutes old at most): increase() then
# starts from the counters' first sample, 0, and needs no extrapolation at the start.
WINDOW_SECONDS = 900


def _post(url: str, inputs: list[dict[str, Any]]) -> tuple[int, float]:
    """(HTTP status, seconds) of one /infer request."""
    body = json.dumps({"inputs": inputs}).encode()
    request = urllib.request.Request(f"{url}/v2/models/{MODEL}/infer", data=body,
                                     headers={"Content-Type": "application/json"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        exc.read()
        status = int(exc.code)
    return status, time.perf_counter() - started


def _rank(values: list[float], q: float) -> float:
    """The value at rank floor(q * n) (1-based): the one Triton's summary reports for
    quantile q (prometheus-cpp's CKMS returns the sample before the rank q * n
    crosses, within its 0.001 rank error, which is less than one request here)."""
    ordered = sorted(values)
    return ordered[max(0, math.floor(q * len(ordered)) - 1)]


@pytest.fixture(scope="module")
def served(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """v1 of the toy LM, rolled out and scraped: its release id and Service URL."""
    kube.reset_client()
    storage.reset_client()
    cluster = kube.get_client()
    files = tmp_path_factory.mktemp("upload")
    for path, data in model_files(version_label="v1").items():
        (files / path).write_bytes(data)
    assert cli(["models", "upload", str(files), f"gs://{sandbox.models_bucket}",
                "--server", "triton", "--model", MODEL, "--version", "v1"]) == 0

    def settled() -> Any:
        ledger = load_ledger(cluster, NAMESPACE, MODEL)
        return ledger if ledger.current and not ledger.rollouts[-1].active else None
    ledger = wait_for(settled, READY_SECONDS)
    assert ledger, load_ledger(cluster, NAMESPACE, MODEL).model_dump_json(indent=1)
    release = str(ledger.current)
    selector = release_selector(NAMESPACE, MODEL, release)
    # The counters' first sample (0, before any request) is in Prometheus.
    assert wait_for(lambda: instant_query(f"{SUCCESS_COUNTER}{selector}"), 30), \
        (sandbox.state_dir / "logs" / "monitoring.log").read_text()[-2000:]
    return {"release": release, "url": loopback_url(cluster.get(SERVICES, MODEL, NAMESPACE))}


def test_the_release_series_carry_the_labels_managed_collection_attaches(served):
    [sample] = instant_query(f'{SUCCESS_COUNTER}{{release="{served["release"]}"}}')
    labels = sample.labels
    assert {k: labels[k] for k in ("project_id", "location", "cluster", "namespace", "job",
                                   "container", "top_level_controller_name",
                                   "top_level_controller_type", "deployment", "release",
                                   "model", "version")} == {
        "project_id": "accelops-local", "location": "us-central2-b", "cluster": "sandbox",
        "namespace": NAMESPACE, "job": MODEL, "container": "triton",
        "top_level_controller_name": MODEL, "top_level_controller_type": "Deployment",
        "deployment": MODEL, "release": served["release"], "model": MODEL, "version": "1"}
    assert labels["instance"] == f"{labels['pod']}:metrics"


def test_release_stats_count_every_request_and_bound_the_p99_by_the_clients(served):
    url, release = served["url"], served["release"]
    text = {"name": "text_input", "shape": [1, 1], "datatype": "BYTES", "data": ["hello"]}
    # Reaches the model, which fails it: nv_inference_request_failure{reason="BACKEND"}.
    no_text = {"name": "max_tokens", "shape": [1, 1], "datatype": "INT32", "data": [4]}
    # Refused by Triton before the model (shape without the batch dimension): 400.
    bad_shape = {**text, "shape": [1]}
    latencies: list[float] = []
    statuses: list[int] = []
    for index in range(GOOD + BAD + REFUSED):
        if index % 11 == 10 and statuses.count(500) < BAD:
            statuses.append(_post(url, [no_text])[0])
        elif index % 13 == 12 and statuses.count(400) < REFUSED:
            statuses.append(_post(url, [bad_shape])[0])
        elif statuses.count(200) < GOOD:
            status, seconds = _post(url, [text])
            statuses.append(status)
            latencies.append(seconds)
    while statuses.count(500) < BAD:
        statuses.append(_post(url, [no_text])[0])
    while statuses.count(400) < REFUSED:
        statuses.append(_post(url, [bad_shape])[0])
    assert sorted(set(statuses)) == [200, 400, 500]
    assert (statuses.count(200), statuses.count(500), statuses.count(400)) == \
        (GOOD, BAD, REFUSED)

    selector = release_selector(NAMESPACE, MODEL, release)
    # Wait for a scrape after the last request, then ask as of that scrape.
    scraped = wait_for(lambda: _value(instant_query(f"sum({SUCCESS_COUNTER}{selector})"))
                       == GOOD, 30)
    assert scraped
    last_scrape = _value(instant_query(f"max(timestamp({SUCCESS_COUNTER}{selector}))"))
    assert last_scrape is not None

    def as_of_last_scrape(promql: str) -> list[Sample]:
        return instant_query(promql, at=last_scrape)

    stats = release_stats(as_of_last_scrape, NAMESPACE, MODEL, release, WINDOW_SECONDS)

    # Requests Triton refuses before the model (400) are in neither counter.
    assert (stats.requests, stats.failures) == (GOOD + BAD, BAD)
    assert stats.error_rate == pytest.approx(BAD / (GOOD + BAD), abs=1e-12)
    assert stats.p99_ms is not None
    # Server time is inside each request's client time, so the server's k-th smallest
    # latency is at most the client's k-th smallest: the bound holds at the same rank.
    client_p99_ms = _rank(latencies, 0.99) * 1000
    assert 0 < stats.p99_ms <= client_p99_ms, (stats, client_p99_ms, sorted(latencies)[-5:])


def _value(samples: list[Sample]) -> float | None:
    return samples[0].value if samples else None


def test_the_functions_are_pointed_at_the_sandbox_prometheus(sandbox):
    env = sandbox.function_env("reconcile_models")
    assert env["ACCELOPS_PROMETHEUS_URL"] == sandbox.prometheus_url
    assert instant_query("vector(1)", environ=env)[0].value == 1.0


def test_a_malformed_query_is_refused_by_prometheus_as_bad_data(sandbox):
    with pytest.raises(InvalidQueryError, match="parse error"):
        instant_query("sum(nv_inference_request_success")
