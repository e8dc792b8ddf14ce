"""reconcile_slices' lifecycle records through functions-framework, against the sandbox
Kubernetes and GKE APIs over sockets, read back from the Pub/Sub stand-in with
google-cloud-pubsub. Kueue, pods and JobSet conditions are written into the store by
hand (no controllers run here); the GKE clock is advanced by hand."""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

from sandbox.gke import GkeApiServer
from sandbox.kubeapi import KubeApiServer
from sandbox.pubsub import SubscriptionConfig
from shared import gke, kube
from shared.config import Settings
from shared.metrics.job_event import JobEventRecord
from shared.names import pool_name
from shared.slices.record import RECORD_NAME
from tests.functional.conftest import pull_job_events
from tests.functional.test_reconcile_slices import admit, finish, submit, trigger
from tests.jobs_fixtures import JOB_EVENTS_SUB, METRICS_TOPIC, PROJECT

ADMITTED = "2026-11-21T09:59:00Z"


def run(reconcile_app: Any) -> list[JobEventRecord]:
    """One reconcile_slices delivery (acknowledged), and the records it published."""
    assert trigger(reconcile_app) == 200
    found = []
    for message in pull_job_events():
        assert message.attributes["kind"] == "job_event"
        found.extend(JobEventRecord.model_validate(r) for r in json.loads(message.data))
    return [r for r in found if r.event != "submitted"]


def kueue_admits(kube_api: KubeApiServer, jobset: dict[str, Any]) -> None:
    """Kueue's part: a Workload owned by the JobSet, Admitted at ADMITTED; the JobSet
    unsuspended."""
    meta = jobset["metadata"]
    job = jobset["spec"]["replicatedJobs"][0]
    pod_set = {"name": job["name"],
               "count": job["replicas"] * job["template"]["spec"]["parallelism"],
               "template": job["template"]["spec"]["template"]}
    kube_api.store.create("kueue.x-k8s.io", "workloads", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"name": f"jobset-{meta['name']}-abcde", "namespace": meta["namespace"],
                     "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2",
                                          "kind": "JobSet", "name": meta["name"],
                                          "uid": meta["uid"]}]},
        "spec": {"queueName": "research-queue", "podSets": [pod_set]}},
        namespace=meta["namespace"])
    kube_api.store.patch("kueue.x-k8s.io", "workloads", f"jobset-{meta['name']}-abcde",
                         {"status": {"conditions": [{
                             "type": "Admitted", "status": "True", "reason": "Admitted",
                             "message": "", "lastTransitionTime": ADMITTED}]}},
                         namespace=meta["namespace"], subresource="status")
    admit(kube_api, jobset)


def pods_run(kube_api: KubeApiServer, jobset: dict[str, Any], started: list[str]) -> None:
    """One pod per start time, its container running since then."""
    meta = jobset["metadata"]
    for index, at in enumerate(started):
        name = f"{meta['name']}-slice-0-{index}"
        kube_api.store.create("", "pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": meta["namespace"],
                         "labels": {"jobset.sigs.k8s.io/jobset-name": meta["name"]}},
            "spec": {"containers": [{"name": "main", "image": "x"}]}},
            namespace=meta["namespace"])
        kube_api.store.patch("", "pods", name, {"status": {
            "phase": "Running", "containerStatuses": [
                {"name": "main", "ready": True, "restartCount": 0,
                 "state": {"running": {"startedAt": at}}}]}},
            namespace=meta["namespace"], subresource="status")


def operations(gke_api: GkeApiServer) -> dict[tuple[str, str], Any]:
    """(pool, CREATE|DELETE) -> the operation, as google-cloud-container reads it."""
    settings = Settings.from_env()
    listed = gke.container_client(settings).list_operations(
        parent=f"projects/{settings.project}/locations/{settings.location}")
    return {(op.target_link.rsplit("/", 1)[1], "CREATE" if "CREATE" in op.operation_type.name
             else "DELETE"): op for op in listed.operations}


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_jobs_life_through_reconcile_is_published_once_per_transition_at_gke_and_kueue_times(
    app_client, reconcile_app, kube_api, gke_api, clock
):
    jobset = submit(app_client, tpu={"type": "v5litepod-16", "slices": 1})
    name = jobset["metadata"]["name"]
    pool = pool_name("research", name, 0)
    assert run(reconcile_app) == []  # queued: nothing to say yet
    kueue_admits(kube_api, jobset)

    requested = run(reconcile_app)
    clock.advance(200)
    ready = run(reconcile_app)
    pods_run(kube_api, jobset, [f"2026-11-21T10:0{i}:00Z" for i in range(4)])
    running = run(reconcile_app)
    finish(kube_api, jobset, "2026-11-21T11:00:00Z")
    finished = run(reconcile_app)  # long past the grace period: the delete starts
    clock.advance(100)
    deleted = run(reconcile_app)
    after = run(reconcile_app)

    ops = operations(gke_api)
    create, delete = ops[(pool, "CREATE")], ops[(pool, "DELETE")]
    assert [(r.event, r.at) for r in requested] == [
        ("admitted", instant(ADMITTED)), ("slice_requested", instant(create.start_time))]
    assert [(r.event, r.at) for r in ready] == [("slice_ready", instant(create.end_time))]
    assert [(r.event, r.at) for r in running] == [("running", instant("2026-11-21T10:03:00Z"))]
    assert [(r.event, r.outcome, r.at) for r in finished] == [
        ("finished", "succeeded", instant("2026-11-21T11:00:00Z"))]
    assert [(r.event, r.at, r.pool) for r in deleted] == [
        ("slice_deleted", instant(delete.end_time), pool)]
    assert after == []
    assert {r.request_id for r in requested + deleted} == {"9876543210"}
    assert {(r.team, r.tpu_type, r.slices, r.chips_per_slice) for r in requested} == {
        ("research", "v5litepod-16", 1, 16)}


def test_a_run_that_cannot_publish_is_retried_and_the_next_one_reports_what_it_saw(
    app_client, reconcile_app, kube_api, gke_api, pubsub_api
):
    jobset = submit(app_client, tpu={"type": "v5litepod-16", "slices": 2})
    kueue_admits(kube_api, jobset)
    pull_job_events()
    topic = f"projects/{PROJECT}/topics/{METRICS_TOPIC}"
    pubsub_api.broker.delete_topic(topic)

    assert trigger(reconcile_app) == 500
    # The topic back, and a subscription on it (the old one stays detached, as in Pub/Sub).
    pubsub_api.broker.create_topic(topic)
    pubsub_api.broker.delete_subscription(JOB_EVENTS_SUB)
    pubsub_api.broker.create_subscription(SubscriptionConfig(name=JOB_EVENTS_SUB, topic=topic))
    records = run(reconcile_app)

    # The operations the failed run started were kept: none is started twice.
    assert gke_api.request_log.count("POST", "/nodePools") == 2
    assert sorted((r.event, r.slice_index) for r in records) == [
        ("admitted", None), ("slice_requested", 0), ("slice_requested", 1)]


def record_state() -> tuple[dict[str, Any], str]:
    """The slice record's state and its resourceVersion."""
    configmap = kube.get_client().get(kube.Resource("", "v1", "configmaps"), RECORD_NAME,
                                      "accelops-system")
    return json.loads(configmap["data"]["state.json"]), configmap["metadata"]["resourceVersion"]


def mark_reporting(kube_api: KubeApiServer, when: float) -> None:
    """Another run took the record to publish transitions at ``when`` (this machine's clock)."""
    state, _ = record_state()
    kube_api.store.patch("", "configmaps", RECORD_NAME, {"data": {"state.json": json.dumps(
        {**state, "reporting": when})}}, namespace="accelops-system")


def test_a_run_leaves_the_transitions_to_another_run_publishing_them_until_it_is_presumed_dead(
    app_client, reconcile_app, kube_api, gke_api
):
    jobset = submit(app_client, tpu={"type": "v5litepod-16", "slices": 1})
    assert run(reconcile_app) == []  # the record exists
    kueue_admits(kube_api, jobset)
    mark_reporting(kube_api, time.time())
    _, version = record_state()

    assert run(reconcile_app) == []  # nothing published, nothing started, nothing written
    assert record_state()[1] == version
    assert gke_api.request_log.count("POST", "/nodePools") == 0
    mark_reporting(kube_api, time.time() - 61)
    taken_over = run(reconcile_app)

    assert [r.event for r in taken_over] == ["admitted", "slice_requested"]
    assert record_state()[0]["reporting"] == 0.0
