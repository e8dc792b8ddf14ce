"""A release's own metrics, end to end: real tritonserver pods serve an uploaded model,
the sandbox's Prometheus scrapes them as managed collection would, and
``release_stats`` reads the counts and p99 back through the Prometheus adapter.

The truth is the test's own: how many requests it sent, which of them failed, how long
it asked the model to take for each (the model sleeps that long), and each one's
latency measured at the client. Every request's server time lies between the two, so
the server's p99 lies between the same ranks of both.
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
from shared.serving.triton import release_name
from tests.e2e.conftest import wait_for

pytestmark = pytest.mark.e2e

SANDBOX_PARTS = {"serving"}
NAMESPACE = "serving"
MODEL = "sleepy"
READY_SECONDS = 90.0
GOOD, BAD, REFUSED = 60, 6, 3  # answered, failed by the model, refused by Triton
# A Python-backend model that sleeps delay_ms before answering, and fails (raises) for a
# negative one: each request's server time is at least its delay.
CONFIG = b"""backend: "python"
max_batch_size: 0
input [ { name: "delay_ms" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "waited_ms" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
MODEL_PY = b"""import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            delay = pb_utils.get_input_tensor_by_name(request, "delay_ms").as_numpy()
            if int(delay[0]) < 0:
                raise ValueError("a negative delay")
            time.sleep(int(delay[0]) / 1000)
            responses.append(pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("waited_ms", delay)]))
        return responses
"""
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


@pytest.fixture(scope="module")
def served(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """v1 of the toy LM, rolled out and scraped: its release id and Service URL."""
    kube.reset_client()
    storage.reset_client()
    cluster = kube.get_client()
    files = tmp_path_factory.mktemp("upload")
    (files / "config.pbtxt").write_bytes(CONFIG)
    (files / "model.py").write_bytes(MODEL_PY)
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
    # The release's own Service: every request reaches exactly this release.
    service = cluster.get(SERVICES, release_name(MODEL, release), NAMESPACE)
    return {"release": release, "url": loopback_url(service)}


def test_the_release_series_carry_the_labels_managed_collection_attaches(served):
    [sample] = instant_query(f'{SUCCESS_COUNTER}{{release="{served["release"]}"}}')
    labels = sample.labels
    assert {k: labels[k] for k in ("project_id", "location", "cluster", "namespace", "job",
                                   "container", "top_level_controller_name",
                                   "top_level_controller_type", "deployment", "release",
                                   "model", "version")} == {
        "project_id": "accelops-local", "location": "us-central2-b", "cluster": "sandbox",
        "namespace": NAMESPACE, "job": MODEL, "container": "triton",
        "top_level_controller_name": release_name(MODEL, served["release"]),
        "top_level_controller_type": "Deployment",
        "deployment": MODEL, "release": served["release"], "model": MODEL, "version": "1"}
    assert labels["instance"] == f"{labels['pod']}:metrics"


def test_release_stats_count_every_request_and_place_the_p99_between_truths(served):
    url, release = served["url"], served["release"]
    # 2, 4, ... 120 ms, shuffled by a fixed stride so slow and fast requests interleave.
    delays = [2 * (1 + (i * 37) % GOOD) for i in range(GOOD)]
    client: list[float] = []
    statuses: list[int] = []
    for index, delay in enumerate(delays):
        status, seconds = _post(url, [_delay(delay)])
        statuses.append(status)
        client.append(seconds * 1000)
        if index % 10 == 9:
            # Reaches the model, which raises: nv_inference_request_failure{reason="BACKEND"}.
            statuses.append(_post(url, [_delay(-1)])[0])
            if index < 10 * REFUSED:
                # No batch dimension to spare (dims [1], shape [2]): Triton answers 400
                # before the model sees it.
                statuses.append(_post(url, [{**_delay(1), "shape": [2],
                                             "data": [1, 1]}])[0])
    assert (statuses.count(200), statuses.count(500), statuses.count(400)) == \
        (GOOD, BAD, REFUSED), statuses

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
    # delay_i <= server_i <= client_i for every request, so the k-th smallest server
    # time lies between the k-th smallest delay and the k-th smallest client time. The
    # summary reports rank floor(0.99 n) within its 0.001 rank error; one rank either
    # side is allowed for how prometheus-cpp's CKMS rounds.
    rank = math.floor(0.99 * GOOD)
    low, high = sorted(delays)[rank - 2], sorted(client)[rank]
    assert stats.p99_ms is not None
    assert low <= stats.p99_ms <= high, (stats, low, high)


def _delay(ms: int) -> dict[str, Any]:
    return {"name": "delay_ms", "shape": [1], "datatype": "INT32", "data": [ms]}


def _value(samples: list[Sample]) -> float | None:
    return samples[0].value if samples else None


def test_the_functions_are_pointed_at_the_sandbox_prometheus(sandbox):
    env = sandbox.function_env("reconcile_models")
    assert env["ACCELOPS_PROMETHEUS_URL"] == sandbox.prometheus_url
    assert instant_query("vector(1)", environ=env)[0].value == 1.0


def test_a_malformed_query_is_refused_by_prometheus_as_bad_data(sandbox):
    with pytest.raises(InvalidQueryError, match="parse error"):
        instant_query("sum(nv_inference_request_success")
