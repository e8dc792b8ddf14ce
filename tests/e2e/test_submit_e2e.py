"""The whole path on a running sandbox: separate processes, real sockets, real clients.

A request published with google-cloud-pubsub is pushed by the sandbox Pub/Sub to
submit_job (functions-framework), which applies a JobSet to the sandbox Kubernetes
API; the test reads it back with the kubernetes client.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.cloud import pubsub_v1
from kubernetes import client as k8s

from sandbox.supervisor.runner import Sandbox
from sandbox.topology import PROJECT
from tests.e2e.conftest import wait_for

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
REQUESTS = REPO / "sandbox" / "requests"








@pytest.fixture(scope="module")
def publisher(sandbox: Sandbox) -> Iterator[Any]:
    client = pubsub_v1.PublisherClient()
    try:
        yield client
    finally:
        client.transport.close()


def publish(publisher: Any, body: dict[str, Any] | bytes) -> str:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    topic = publisher.topic_path(PROJECT, "job-requests")
    return str(publisher.publish(topic, data).result(timeout=10))


def jobsets_for(custom: k8s.CustomObjectsApi, request_id: str) -> list[dict[str, Any]]:
    items = custom.list_cluster_custom_object("jobset.x-k8s.io", "v1alpha2", "jobsets")["items"]
    return [j for j in items
            if j["metadata"]["annotations"].get("accelops.dev/request-id") == request_id]


def function_log(sandbox: Sandbox) -> list[dict[str, Any]]:
    lines = (sandbox.state_dir / "logs" / "submit_job.log").read_text().splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def request(name: str, request_id: str, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((REQUESTS / name).read_text())
    return {**body, "request_id": request_id, **changes}


def test_a_published_request_becomes_a_jobset_read_back_with_the_kubernetes_client(
    sandbox, publisher, custom
):
    publish(publisher, request("gemma-v4.json", "e2e-single"))

    [jobset] = wait_for(lambda: jobsets_for(custom, "e2e-single"))

    assert jobset["metadata"]["namespace"] == "research"
    job = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job["parallelism"] == 4
    pod = job["template"]["spec"]
    assert pod["nodeSelector"]["cloud.google.com/gke-tpu-topology"] == "2x2x4"


def test_the_sandbox_installs_kueue_and_jobset_before_its_queues_and_waits_for_them(
    sandbox, custom
):
    apps = k8s.AppsV1Api(custom.api_client)
    managers = [apps.read_namespaced_deployment("kueue-controller-manager", "kueue-system"),
                apps.read_namespaced_deployment("jobset-controller-manager", "jobset-system")]
    queue = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues",
                                             "research-cluster-queue")

    assert [next(c.status for c in d.status.conditions if c.type == "Available")
            for d in managers] == ["True", "True"]
    # Applied through Kueue's webhooks: the defaulting one added its finalizer.
    assert queue["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]


def test_a_jobset_from_a_request_went_through_the_jobset_and_kueue_webhooks(
    sandbox, publisher, custom
):
    publish(publisher, request("gemma-v4.json", "e2e-defaults"))

    [jobset] = wait_for(lambda: jobsets_for(custom, "e2e-defaults"))

    assert jobset["spec"]["successPolicy"] == {"operator": "All"}
    assert jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] == \
        "Indexed"


def test_duplicate_publishes_of_one_request_leave_exactly_one_jobset(
    sandbox, publisher, custom
):
    body = request("serve-v6e.json", "e2e-duplicate")
    ids = [publish(publisher, body) for _ in range(3)]

    def outcomes() -> list[str]:
        # Each delivery logs its outcome once, among other lines (the lifecycle record).
        return [e["message"] for e in function_log(sandbox) if e.get("message_id") in ids
                and (e["message"] == "JobSet created" or "duplicate" in e["message"])]

    wait_for(lambda: len(outcomes()) >= 3)

    assert len(jobsets_for(custom, "e2e-duplicate")) == 1
    assert outcomes().count("JobSet created") == 1
    assert sum("duplicate" in m for m in outcomes()) == 2


def test_an_invalid_request_is_rejected_with_its_reason_and_creates_nothing(
    sandbox, publisher, custom
):
    subscriber = pubsub_v1.SubscriberClient()
    path = subscriber.subscription_path(PROJECT, "job-rejections-sandbox")
    body = request("llama-multislice.json", "e2e-invalid", tpu={"type": "v9-8", "slices": 1})
    message_id = publish(publisher, body)
    try:
        def rejected() -> list[Any]:
            response = subscriber.pull(subscription=path, max_messages=10, timeout=5)
            return [m for m in response.received_messages
                    if m.message.attributes["source_message_id"] == message_id]

        [received] = wait_for(rejected)
    finally:
        subscriber.close()

    assert received.message.attributes["rejection_field"] == "tpu.type"
    assert "v9-8" in received.message.attributes["rejection_reason"]
    assert json.loads(received.message.data) == body
    assert jobsets_for(custom, "e2e-invalid") == []


def test_kubernetes_down_is_retried_and_the_request_lands_once_it_is_back(
    sandbox, publisher, custom
):
    sandbox.stop_component("cluster")
    message_id = publish(publisher, request("mixtral-v5p.json", "e2e-outage"))
    retries = wait_for(lambda: [e for e in function_log(sandbox)
                                if e.get("message_id") == message_id
                                and e["message"].startswith("will retry")])
    sandbox.restart("cluster")

    [jobset] = wait_for(lambda: jobsets_for(custom, "e2e-outage"), timeout=30)

    assert retries, "the function should have failed while the API was down"
    assert jobset["spec"]["replicatedJobs"][0]["replicas"] == 3
    time.sleep(1.0)  # a late redelivery, if any, would show up as a second JobSet
    assert len(jobsets_for(custom, "e2e-outage")) == 1


def test_jobs_submit_publishes_a_file_to_the_sandbox(sandbox, custom):
    body = request("serve-v6e.json", "e2e-cli")
    path = sandbox.state_dir / "cli-request.json"
    path.write_text(json.dumps(body))

    result = subprocess.run([sys.executable, "-m", "shared.cli", "jobs", "submit", str(path)],
                            capture_output=True, text=True, timeout=60, check=False)

    assert result.returncode == 0, result.stderr
    assert "message id" in result.stdout
    assert wait_for(lambda: jobsets_for(custom, "e2e-cli"))
