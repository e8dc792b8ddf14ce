"""Model uploads served on the whole sandbox: fake-gcs-server notifications pushed to
deploy_model, real tritonserver pods reading their gs:// release from it, the Gateway
routing by weight, a canary judged on the servers' metrics in a real Prometheus,
reconcile_models on the scheduler's ticks — driven with the real clients."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from sandbox.cluster.objects import loopback_url
from sandbox.inference.toy_lm import generate
from sandbox.inference.toy_lm_model import model_files
from sandbox.supervisor.runner import Sandbox
from shared import kube, storage
from shared.cli import main as cli
from shared.kube import GATEWAYS, PODS
from shared.serving.ledger import load_ledger
from shared.serving.triton import release_selector
from tests.e2e.conftest import wait_for
from tests.serving_fixtures import upload_version

SANDBOX_PARTS = {"serving"}
NAMESPACE = "serving"
READY_SECONDS = 90.0


@pytest.fixture(scope="module")
def cluster(sandbox: Sandbox) -> Any:
    kube.reset_client()
    storage.reset_client()
    return kube.get_client()


@pytest.fixture(scope="module")
def bucket(sandbox: Sandbox) -> Any:
    from sandbox.storage import storage_client

    return storage_client(sandbox.storage_url, "accelops-local").bucket(sandbox.models_bucket)


def ledger(client: Any) -> Any:
    return load_ledger(client, NAMESPACE, "toy-lm")


def settled(client: Any, version: str) -> Any:
    """The ledger once the newest rollout of ``version`` has left the active states."""
    def done() -> Any:
        current = ledger(client)
        rollouts = [r for r in current.rollouts if r.version == version]
        return current if rollouts and not rollouts[-1].active else None
    return wait_for(done, READY_SECONDS)


def gateway(client: Any) -> str:
    """Where clients reach every model: the serving Gateway's loopback listener."""
    return loopback_url(client.get(GATEWAYS, "models", NAMESPACE), "http")


def infer(url: str, prompt: str) -> dict[str, Any]:
    body = json.dumps({"inputs": [{"name": "text_input", "shape": [1, 1],
                                   "datatype": "BYTES", "data": [prompt]}]}).encode()
    request = urllib.request.Request(f"{url}/v2/models/toy-lm/infer", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        result: dict[str, Any] = json.loads(response.read())
        return result


def test_uploads_deploy_switch_without_loss_and_roll_back_a_broken_version(
        sandbox, cluster, bucket, tmp_path, capsys):
    for path, data in model_files(version_label="v1").items():
        (tmp_path / path).write_bytes(data)
    assert cli(["models", "upload", str(tmp_path), f"gs://{sandbox.models_bucket}",
                "--server", "triton", "--model", "toy-lm", "--version", "v1",
                "--max-replicas", "2"]) == 0

    v1 = settled(cluster, "v1")
    assert v1 is not None, ledger(cluster).model_dump_json(indent=1)
    assert v1.find(v1.current).version == "v1"
    url = gateway(cluster)
    answer = infer(url, "hello world")
    assert answer["outputs"][0]["data"] == [generate("hello world").text]
    assert answer["model_version"] == "1"

    # v2 while a client keeps asking: it is ready, takes 5, 25, then 50% of the requests,
    # and is promoted; no request may fail through the switch.
    failures: list[str] = []
    versions: set[str] = set()
    stop = threading.Event()

    def client_loop() -> None:
        while not stop.is_set():
            try:
                versions.add(infer(url, "through the switch")["model_version"])
            except (urllib.error.URLError, OSError) as exc:
                failures.append(str(exc))
            time.sleep(0.02)

    thread = threading.Thread(target=client_loop, daemon=True)
    thread.start()
    try:
        upload_version(bucket, "toy-lm", "v2", model_files(version_label="v2"))
        v2 = settled(cluster, "v2")
    finally:
        stop.set()
        thread.join(timeout=15)
    assert v2 is not None
    assert v2.find(v2.current).version == "v2", v2.model_dump_json(indent=1)
    assert failures == []
    assert versions == {"1", "2"}
    canary = v2.find(v2.current).canary
    assert [(r.weight, r.action) for r in canary.decisions] == [
        (5, "advance"), (25, "advance"), (50, "promote")]
    assert all(r.new.requests >= canary.policy.min_requests for r in canary.decisions)
    assert infer(url, "after")["model_version"] == "2"

    # A broken v3: Triton cannot load it; v2 keeps serving and v3 is rolled back.
    upload_version(bucket, "toy-lm", "v3", model_files(broken=True, version_label="v3"))
    v3 = settled(cluster, "v3")
    assert v3 is not None
    rollout = [r for r in v3.rollouts if r.version == "v3"][-1]
    assert rollout.state == "rolled-back", rollout
    assert "RuntimeError: toy-lm v3 is broken on purpose" in (rollout.reason or "")
    assert v3.find(v3.current).version == "v2"
    assert infer(url, "after the rollback")["model_version"] == "2"

    # A v4 that answers the same text three times slower: held at 5% and rolled back
    # on its p99 once it has answered enough requests.
    stop.clear()
    failures.clear()
    thread = threading.Thread(target=client_loop, daemon=True)
    thread.start()
    try:
        upload_version(bucket, "toy-lm", "v4", model_files(version_label="v4", slowdown=3))
        v4 = settled(cluster, "v4")
    finally:
        stop.set()
        thread.join(timeout=15)
    assert v4 is not None
    slow = [r for r in v4.rollouts if r.version == "v4"][-1]
    assert slow.state == "rolled-back", slow
    assert re.search(r"missed its SLO at 5%: (compute )?p99", slow.reason or "")
    assert [(r.weight, r.action) for r in slow.canary.decisions] == [(5, "roll back")]
    assert v4.find(v4.current).version == "v2"
    assert failures == []
    capsys.readouterr()
    assert cli(["models", "list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("toy-lm"))
    assert row.split()[:6] == ["toy-lm", "triton", "toy-lm", "v2", "v1", "v4"]
    assert "rolled-back" in row
    assert cli(["models", "status", "toy-lm"]) == 0
    status = capsys.readouterr().out
    assert "canary      v4 against v2: rolled-back" in status
    assert "roll back" in status


def test_a_restarted_pod_serves_the_rolled_out_version(sandbox, cluster):
    current = ledger(cluster)
    assert current.current is not None, "runs after the rollout test"
    selector = ",".join(f"{k}={v}" for k, v in
                        release_selector("toy-lm", current.current).items())
    [pod] = [p for p in cluster.list(PODS, NAMESPACE, label_selector=selector)
             if p["metadata"].get("deletionTimestamp") is None]
    cluster.delete(PODS, pod["metadata"]["name"], NAMESPACE)

    def replaced() -> Any:
        pods = [p for p in cluster.list(PODS, NAMESPACE, label_selector=selector)
                if p["metadata"]["name"] != pod["metadata"]["name"]
                and any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in (p.get("status") or {}).get("conditions") or [])]
        return pods
    assert wait_for(replaced, READY_SECONDS)
    url = gateway(cluster)
    assert wait_for(lambda: _version(url) == current.find(current.current).version.lstrip("v"),
                    30)


def _version(url: str) -> str | None:
    try:
        return str(infer(url, "restart")["model_version"])
    except (urllib.error.URLError, OSError):
        return None
