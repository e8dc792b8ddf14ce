"""Cluster objects of jobs in every state, as accelops, Kueue and JobSet write them.

The JobSet is the one submit_job renders (``render_jobset``); its Workload, pods and
status are shaped like Kueue's and JobSet's (the sandbox controllers' shapes). Used
by the unit tests of the status core (as dicts) and, written straight into a sandbox
Kubernetes API's store, by the lookup tests and the jobs benchmark, which need many
jobs without simulating each one.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from shared.config import AccelopsConfig, parse_config
from shared.jobspec.policy import check_policy
from shared.jobspec.render import render_jobset
from shared.jobspec.request import JobRequest

if TYPE_CHECKING:
    from sandbox.kubeapi import ObjectStore

CONFIG = parse_config("""
teams:
  research: {namespace: research, queue: research-queue, tpu_chips: 64}
  inference: {namespace: inference, queue: inference-queue, tpu_chips: 16}
""")
STAMP = "2026-11-23T10:00:{:02d}Z"
KUEUE = "kueue.x-k8s.io/v1beta1"
V5E = "tpu-v5-lite-podslice"


def stamp(second: int) -> str:
    """A creation time ``second`` seconds (and minutes, past 59) after 10:00."""
    return f"2026-11-23T{10 + second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z"


def jobset(request_id: str, *, team: str = "research", tpu: str = "v5litepod-16",
           slices: int = 2, created: int = 0, uid: str | None = None,
           config: AccelopsConfig = CONFIG, max_restarts: int = 0) -> dict[str, Any]:
    """The JobSet submit_job makes for a request (suspended, as created)."""
    request = JobRequest.model_validate({
        "name": f"job-{request_id}", "team": team, "image": "us-docker.pkg.dev/acme/t:1",
        "tpu": {"type": tpu, "slices": slices}, "request_id": request_id,
        "max_restarts": max_restarts})
    body = render_jobset(check_policy(request, config), request_id)
    body["metadata"]["uid"] = uid or f"uid-{request_id}"
    body["metadata"]["creationTimestamp"] = stamp(created)
    return body


def workload(js: dict[str, Any], *, priority: int = 200, admitted_in: str | None = None,
             message: str | None = None, flavor: str = V5E) -> dict[str, Any]:
    """Kueue's Workload for the JobSet: admitted into ``admitted_in``, or pending with
    Kueue's ``message``."""
    meta = js["metadata"]
    job = js["spec"]["replicatedJobs"][0]
    count = job["replicas"] * job["template"]["spec"]["parallelism"]
    chips = int(job["template"]["spec"]["template"]["spec"]["containers"][0]["resources"]
                ["limits"]["google.com/tpu"])
    body: dict[str, Any] = {
        "apiVersion": KUEUE, "kind": "Workload",
        "metadata": {"name": f"jobset-{meta['name']}-0a1b2", "namespace": meta["namespace"],
                     "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
                     "creationTimestamp": meta["creationTimestamp"],
                     "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2",
                                          "kind": "JobSet", "name": meta["name"],
                                          "uid": meta["uid"], "controller": True}]},
        "spec": {"queueName": meta["labels"]["kueue.x-k8s.io/queue-name"], "active": True,
                 "priority": priority,
                 "podSets": [{"name": "slice", "count": count,
                              "template": job["template"]["spec"]["template"]}]},
        "status": {"conditions": []},
    }
    if admitted_in is not None:
        body["status"] = {
            "admission": {"clusterQueue": admitted_in, "podSetAssignments": [{
                "name": "slice", "count": count, "flavors": {"google.com/tpu": flavor},
                "resourceUsage": {"google.com/tpu": str(count * chips)}}]},
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "message": f"Quota reserved in ClusterQueue {admitted_in}",
                 "lastTransitionTime": meta["creationTimestamp"]},
                {"type": "Admitted", "status": "True", "reason": "Admitted",
                 "message": "The workload is admitted",
                 "lastTransitionTime": meta["creationTimestamp"]}]}
    elif message is not None:
        body["status"]["conditions"] = [{"type": "QuotaReserved", "status": "False",
                                         "reason": "Pending", "message": message,
                                         "lastTransitionTime": meta["creationTimestamp"]}]
    return body


def admitted(js: dict[str, Any], *, ready: int = 0) -> dict[str, Any]:
    """The JobSet once Kueue admitted it, with ``ready`` slices' Jobs ready."""
    out = copy.deepcopy(js)
    out["spec"]["suspend"] = False
    out["status"] = {"restarts": 0, "replicatedJobsStatus": [{
        "name": "slice", "ready": ready, "succeeded": 0, "failed": 0,
        "active": out["spec"]["replicatedJobs"][0]["replicas"], "suspended": 0}]}
    return out


def finished(js: dict[str, Any], *, failed: bool = False, restarts: int = 0) -> dict[str, Any]:
    out = admitted(js)
    kind, reason, message = (("Failed", "ReachedMaxRestarts",
                              "jobset failed due to reaching max number of restarts")
                             if failed else ("Completed", "AllJobsCompleted",
                                             "jobset completed successfully"))
    out["status"]["restarts"] = restarts
    out["status"]["conditions"] = [{"type": kind, "status": "True", "reason": reason,
                                    "message": message,
                                    "lastTransitionTime": "2026-11-23T11:00:00Z"}]
    return out


def pods(js: dict[str, Any], *, phase: str = "Running", attempt: int = 0,
         failed: tuple[int, int] | None = None, message: str | None = None,
         restarts: int = 0) -> list[dict[str, Any]]:
    """The JobSet's pods (one per worker of each slice) of restart ``attempt``; the
    pod of ``failed`` = (slice, worker) ended Failed with exit code 1 and ``message``."""
    meta = js["metadata"]
    job = js["spec"]["replicatedJobs"][0]
    out = []
    for index in range(job["replicas"]):
        for worker in range(job["template"]["spec"]["parallelism"]):
            is_failed = failed == (index, worker)
            state: dict[str, Any] = {"running": {"startedAt": "2026-11-23T10:05:00Z"}}
            if is_failed:
                state = {"terminated": {"exitCode": 1, "reason": "Error",
                                        "finishedAt": "2026-11-23T10:59:00Z",
                                        **({"message": message} if message else {})}}
            out.append({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{meta['name']}-slice-{index}-{worker}-a{attempt}x",
                             "namespace": meta["namespace"],
                             "labels": {"jobset.sigs.k8s.io/jobset-name": meta["name"],
                                        "jobset.sigs.k8s.io/job-index": str(index),
                                        "batch.kubernetes.io/job-completion-index":
                                            str(worker),
                                        "jobset.sigs.k8s.io/restart-attempt": str(attempt)}},
                "spec": {"nodeName": f"node-{index}-{worker}",
                         "containers": [{"name": "main", "image": "us-docker.pkg.dev/acme/t:1"}]},
                "status": {"phase": "Failed" if is_failed else phase,
                           "containerStatuses": [{"name": "main", "restartCount": restarts,
                                                  "ready": not is_failed, "image": "",
                                                  "imageID": "", "state": state}]},
            })
    return out


def cluster_queue(name: str, quota: int, *, reserved: int = 0,
                  strategy: str = "BestEffortFIFO") -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"queueingStrategy": strategy, "resourceGroups": [{
                "coveredResources": ["google.com/tpu"],
                "flavors": [{"name": V5E, "resources": [{"name": "google.com/tpu",
                                                         "nominalQuota": quota}]}]}]},
            "status": {"flavorsReservation": [{"name": V5E, "resources": [
                {"name": "google.com/tpu", "total": str(reserved)}]}]}}


def local_queue(namespace: str, name: str, cluster_queue_name: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue_name}}


_PLURALS = {"JobSet": "jobsets", "Workload": "workloads", "Pod": "pods",
            "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues",
            "Namespace": "namespaces", "ConfigMap": "configmaps"}


def write(store: ObjectStore, obj: dict[str, Any]) -> dict[str, Any]:
    """Create the object in the store (which gives it its uid and creation time, from
    the store's clock) and return it as stored."""
    body = copy.deepcopy(obj)
    for key in ("uid", "creationTimestamp"):
        body["metadata"].pop(key, None)
    return dict(store.create(obj["apiVersion"].rpartition("/")[0], _PLURALS[obj["kind"]],
                             body, namespace=obj["metadata"].get("namespace")))


def namespaces(store: ObjectStore, *names: str) -> None:
    for name in names:
        write(store, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
