"""``run_on_cluster`` against the sandbox Kubernetes API, whose service proxy relays to a
stand-in of the Locust master's web API (the fields of locust/web.py at 2.47): what
the command refuses, and that it always stops the master. The whole path with a real
master, real workers and BigQuery is tests/e2e/test_loadtest_cluster_e2e.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from sandbox.cluster.services import pod_address
from sandbox.kubeapi import KubeApiServer, start_kube_api
from shared import kube
from shared.deployment.loadtest import run_on_cluster
from shared.deployment.swarm import SwarmTest
from shared.metrics.loadtest.completion import LoadTestError
from shared.metrics.loadtest.model import TestSummary as Summary
from tests.fake_metrics import make_summary

NS = "serving"
TEST = SwarmTest(test_id="lt-f", host="http://10.0.0.9:80", model="toy-lm", users=2,
                 duration_s=1)


class _Master:
    """The master's state as its web API shows it."""

    def __init__(self) -> None:
        self.state = "ready"
        self.workers = ["w_1", "w_2"]
        self.swarm_answer: dict[str, Any] = {"success": True, "message": "Swarming started"}
        self.forms: list[dict[str, list[str]]] = []
        self.stops = 0
        self.requests = 0

    def stats(self) -> dict[str, Any]:
        return {"state": self.state, "user_count": 0,
                "workers": [{"id": w, "state": "ready"} for w in self.workers],
                "stats": [{"name": "Aggregated", "num_requests": self.requests,
                           "num_failures": 0, "median_response_time": 12,
                           "response_time_percentile_0.99": 30}]}


class _Handler(BaseHTTPRequestHandler):
    master: _Master

    def _send(self, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(self.master.stats())

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        form = parse_qs(self.rfile.read(length).decode()) if length else {}
        if self.path == "/swarm":
            self.master.forms.append(form)
            if self.master.swarm_answer["success"]:
                # A run that is over by the next poll, as a short run time makes it.
                self.master.state, self.master.requests = "stopped", 42
            self._send(self.master.swarm_answer)
        else:
            self.master.stops += 1
            self._send({"success": True, "message": "Test stopped"})

    def log_message(self, format: str, *args: object) -> None:
        return None


class _Rows:
    """A metrics source that already holds the test's rows."""

    def __init__(self, count: int) -> None:
        self.count = count

    def summary(self, test_id: str) -> Summary:
        return make_summary(test_id, requests=self.count, p50_ms=12.0, p90_ms=20.0,
                            p99_ms=31.0)


@pytest.fixture
def master(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Master]:
    state = _Master()
    handler = type("Handler", (_Handler,), {"master": state})
    http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    api: KubeApiServer = start_kube_api(pod_address=pod_address)
    store, port = api.store, http.server_address[1]
    store.create("", "namespaces", {"metadata": {"name": NS}})
    store.create("apps", "deployments", {
        "metadata": {"name": "locust-worker", "namespace": NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"c": "w"}},
                 "template": {"metadata": {"labels": {"c": "w"}},
                              "spec": {"containers": [{"name": "l", "image": "x"}]}}}},
        namespace=NS)
    store.create("", "services", {"metadata": {"name": "locust-master", "namespace": NS},
                                  "spec": {"selector": {"c": "m"}, "ports": [
                                      {"name": "web", "port": 8089, "targetPort": 8089}]}},
                 namespace=NS)
    store.create("", "pods", {"metadata": {"name": "m-0", "namespace": NS,
                                           "annotations": {"sandbox.accelops.dev/host-ports":
                                                           json.dumps({"8089": port})}},
                              "spec": {"containers": [{"name": "l", "image": "x"}]},
                              "status": {"podIP": "10.1.0.2"}}, namespace=NS)
    store.create("", "endpoints", {"metadata": {"name": "locust-master", "namespace": NS},
                                   "subsets": [{"ports": [{"name": "web", "port": 8089}],
                                                "addresses": [{"ip": "10.1.0.2", "targetRef": {
                                                    "kind": "Pod", "name": "m-0",
                                                    "namespace": NS}}]}]}, namespace=NS)
    monkeypatch.setenv("KUBECONFIG", str(api.write_kubeconfig(tmp_path / "kubeconfig")))
    kube.reset_client()
    try:
        yield state
    finally:
        kube.reset_client()
        api.stop()
        http.shutdown()
        http.server_close()


class _Time:
    """A clock that moves only when the command sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _run(master: _Master, rows: int = 42, **kwargs: Any) -> Any:
    time = _Time()
    timing = {"clock": time.clock, "sleep": time.sleep, **kwargs}
    return run_on_cluster(kube.get_client(), NS, TEST, 2, _Rows(rows),  # type: ignore[arg-type]
                          progress=lambda line: None, **timing)


def test_a_run_scales_the_workers_posts_the_form_and_reports_the_masters_count(
        master: _Master) -> None:
    done = _run(master)

    assert kube.get_client().scale(kube.DEPLOYMENTS, "locust-worker", NS)["spec"][
        "replicas"] == 2
    assert master.forms[0]["test_id"] == ["lt-f"]
    assert master.forms[0]["run_time"] == ["1s"]
    assert done.summary.requests == 42
    assert done.workers == ("w_1", "w_2")
    assert master.stops == 1
    # Locust's p99 (30) is within 5 % of BigQuery's (31): no note for it.
    assert done.notes == ()


def test_a_master_already_running_a_test_is_not_given_another(master: _Master) -> None:
    master.state = "running"

    with pytest.raises(LoadTestError, match="running a test already"):
        _run(master)
    assert master.forms == []


def test_a_refused_swarm_says_the_masters_reason(master: _Master) -> None:
    master.swarm_answer = {"success": False,
                           "message": "loadgen: --model: name the model of the test"}

    with pytest.raises(LoadTestError, match="refused the test: loadgen: --model"):
        _run(master)


def test_workers_that_never_connect_end_the_wait_with_what_was_seen(master: _Master) -> None:
    master.workers = ["w_1"]

    with pytest.raises(LoadTestError, match=r"2 workers did not connect .*1/2"):
        _run(master, workers_timeout=5)
    assert master.forms == []


def test_rows_that_fall_short_of_the_masters_count_fail_the_run_after_stopping_it(
        master: _Master) -> None:
    with pytest.raises(LoadTestError, match="only 41 of 42 rows"):
        _run(master, rows=41, rows_timeout=0.0)
    assert master.stops == 1
