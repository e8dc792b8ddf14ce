"""Shared vocabulary of the cluster simulation: resource keys, well-known labels,
quantities, conditions, owner references, events and timestamps.

Everything here is pure (no store access) except the writes at the end
(:func:`delete_quietly`, :func:`patch_quietly`, :func:`replace_status`,
:func:`record_event`), which go through an :class:`ObjectStore`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from sandbox.common.clock import SimClock
from sandbox.kubeapi import ApiError, ObjectStore, format_timestamp
from shared.errors import NotFoundError

Obj = dict[str, Any]
ResourceKey = tuple[str, str]

# ----------------------------------------------------------------------------- resources

PODS: ResourceKey = ("", "pods")
NODES: ResourceKey = ("", "nodes")
EVENTS: ResourceKey = ("", "events")
SERVICES: ResourceKey = ("", "services")
ENDPOINTS: ResourceKey = ("", "endpoints")
DEPLOYMENTS: ResourceKey = ("apps", "deployments")
REPLICASETS: ResourceKey = ("apps", "replicasets")
HPAS: ResourceKey = ("autoscaling", "horizontalpodautoscalers")
JOBS: ResourceKey = ("batch", "jobs")
JOBSETS: ResourceKey = ("jobset.x-k8s.io", "jobsets")
WORKLOADS: ResourceKey = ("kueue.x-k8s.io", "workloads")
LOCAL_QUEUES: ResourceKey = ("kueue.x-k8s.io", "localqueues")
CLUSTER_QUEUES: ResourceKey = ("kueue.x-k8s.io", "clusterqueues")
RESOURCE_FLAVORS: ResourceKey = ("kueue.x-k8s.io", "resourceflavors")
WORKLOAD_PRIORITY_CLASSES: ResourceKey = ("kueue.x-k8s.io", "workloadpriorityclasses")

JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
JOB_API_VERSION = "batch/v1"
APPS_API_VERSION = "apps/v1"
WORKLOAD_API_VERSION = "kueue.x-k8s.io/v1beta1"

# ----------------------------------------------------------------------------- labels

TPU_RESOURCE = "google.com/tpu"
GPU_RESOURCE = "nvidia.com/gpu"
LABEL_GKE_ACCELERATOR = "cloud.google.com/gke-accelerator"
LABEL_POD_TEMPLATE_HASH = "pod-template-hash"
ANNOTATION_REVISION = "deployment.kubernetes.io/revision"
# The loopback ports the process kubelet gives a pod's container ports, and those of a
# Service's proxies (sandbox.cluster.services); clients on the host read the latter
# with loopback_url.
ANNOTATION_HOST_PORTS = "sandbox.accelops.dev/host-ports"
LABEL_NODEPOOL = "cloud.google.com/gke-nodepool"
LABEL_TPU_ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
LABEL_TPU_TOPOLOGY = "cloud.google.com/gke-tpu-topology"
LABEL_SPOT = "cloud.google.com/gke-spot"
LABEL_PREEMPTIBLE = "cloud.google.com/gke-preemptible"
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"

LABEL_QUEUE = "kueue.x-k8s.io/queue-name"
LABEL_PRIORITY = "kueue.x-k8s.io/priority-class"
LABEL_KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"
ANNOTATION_ADMITTED_AT = "sandbox.accelops.dev/admitted-at"

ANNOTATION_EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
LABEL_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
LABEL_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
LABEL_REPLICATED_JOB_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
LABEL_GLOBAL_REPLICAS = "jobset.sigs.k8s.io/global-replicas"
LABEL_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
LABEL_JOB_GLOBAL_INDEX = "jobset.sigs.k8s.io/job-global-index"
LABEL_RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
LABEL_JOB_KEY = "jobset.sigs.k8s.io/job-key"

LABEL_JOB_NAME = "batch.kubernetes.io/job-name"
LABEL_JOB_NAME_LEGACY = "job-name"
LABEL_CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
LABEL_CONTROLLER_UID_LEGACY = "controller-uid"
LABEL_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

ENV_RUN_SECONDS = "ACCELOPS_SANDBOX_RUN_SECONDS"
ENV_OUTCOME = "ACCELOPS_SANDBOX_OUTCOME"

TERMINAL_POD_PHASES = frozenset({"Succeeded", "Failed"})

# ----------------------------------------------------------------------------- time


def timestamp(clock: SimClock) -> str:
    """The simulated time as the API prints it (RFC 3339, second precision, ``Z``)."""
    return format_timestamp(clock.now())


def micro_timestamp(clock: SimClock) -> str:
    """The simulated time as a MicroTime (``eventTime`` of Events)."""
    return clock.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_timestamp(value: Any) -> float | None:
    """Seconds since the epoch of an API timestamp, or None when absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


# ----------------------------------------------------------------------------- quantities

_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_SUFFIX: dict[str, float] = {
    "": 1.0,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}


def parse_quantity(value: Any) -> float:
    """A Kubernetes quantity (``4``, ``500m``, ``16Gi``) as a number; 0 when unparsable."""
    if isinstance(value, bool):
        return 0.0
    if isinstance(value, int | float):
        return float(value)
    match = _QUANTITY.match(str(value).strip())
    if not match:
        return 0.0
    return float(match.group(1)) * _SUFFIX[match.group(2) or ""]


def format_count(value: float) -> str:
    """A whole-number quantity as the API prints it (``"32"``)."""
    return str(round(value))


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, float]:
    """Resource requests of a pod: containers summed, requests defaulting to limits."""
    total: dict[str, float] = {}
    for container in pod_spec.get("containers") or []:
        resources = container.get("resources") or {}
        limits = resources.get("limits") or {}
        requests = {**limits, **(resources.get("requests") or {})}
        for name, quantity in requests.items():
            total[name] = total.get(name, 0.0) + parse_quantity(quantity)
    return total


def tpu_request(pod_spec: Mapping[str, Any]) -> int:
    """Chips a pod asks for (``google.com/tpu``)."""
    return round(pod_requests(pod_spec).get(TPU_RESOURCE, 0.0))


# ----------------------------------------------------------------------------- objects


def meta(obj: Mapping[str, Any]) -> Obj:
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


def name_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("name", ""))


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("namespace") or "")


def uid_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("uid", ""))


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    value = meta(obj).get("labels")
    return dict(value) if isinstance(value, dict) else {}


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    value = meta(obj).get("annotations")
    return dict(value) if isinstance(value, dict) else {}


def loopback_url(service: Mapping[str, Any], port_name: str = "http") -> str:
    """``http://127.0.0.1:PORT`` of the loopback proxy of a Service's port ``port_name``
    (from :data:`ANNOTATION_HOST_PORTS`): where a client on the host reaches any proxied
    Service, ClusterIP ones included, as it would through a port-forward. Fits
    ``shared.serving.operator.load_target``'s ``url_of``. NotFoundError when the
    Service has no proxy for that port."""
    try:
        ports = json.loads(annotations_of(service).get(ANNOTATION_HOST_PORTS) or "{}")
    except ValueError:
        ports = {}
    if isinstance(ports, dict) and port_name in ports:
        return f"http://127.0.0.1:{int(ports[port_name])}"
    raise NotFoundError(f"Service {name_of(service)} has no loopback proxy for its port "
                        f"{port_name!r} (is it proxied? see sandbox/cluster/services.py)")


def deleting(obj: Mapping[str, Any]) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def owner_reference(owner: Mapping[str, Any], api_version: str, kind: str) -> Obj:
    """A controller owner reference to ``owner`` (what controllers put on children)."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name_of(owner),
        "uid": uid_of(owner),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_uid(obj: Mapping[str, Any], kind: str) -> str | None:
    """The uid of the controlling owner of ``kind``, if any."""
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("kind") == kind and ref.get("controller"):
            return str(ref.get("uid", ""))
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("kind") == kind:
            return str(ref.get("uid", ""))
    return None


def children_by_owner(objects: Iterable[Obj], kind: str, *,
                      skip_deleting: bool = False) -> dict[str, list[Obj]]:
    """``objects`` grouped by the uid of their controlling owner of ``kind`` (how each
    controller finds what it made in one list call)."""
    grouped: dict[str, list[Obj]] = {}
    for obj in objects:
        owner = controller_uid(obj, kind)
        if owner and not (skip_deleting and deleting(obj)):
            grouped.setdefault(owner, []).append(obj)
    return grouped


def pod_terminated(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_POD_PHASES


def pod_active(pod: Mapping[str, Any]) -> bool:
    """Not finished and not being deleted: counts against a Job's parallelism and a node."""
    return not pod_terminated(pod) and not deleting(pod)


def short_digest(*parts: str, length: int = 16) -> str:
    digest = hashlib.sha1()  # noqa: S324 - a name, not a security boundary
    for part in parts:
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()[:length]


# ----------------------------------------------------------------------------- conditions


def find_condition(conditions: Iterable[Mapping[str, Any]] | None, kind: str) -> Obj | None:
    for entry in conditions or []:
        if entry.get("type") == kind:
            return dict(entry)
    return None


def is_true(obj: Mapping[str, Any], kind: str) -> bool:
    found = find_condition((obj.get("status") or {}).get("conditions"), kind)
    return found is not None and found.get("status") == "True"


def condition(
    conditions: Iterable[Mapping[str, Any]] | None,
    kind: str,
    status: bool,
    reason: str,
    message: str,
    now: str,
    *,
    extra: Mapping[str, Any] | None = None,
) -> list[Obj]:
    """``conditions`` with ``kind`` set; lastTransitionTime moves only when status flips."""
    value = "True" if status else "False"
    result: list[Obj] = []
    found = False
    for entry in conditions or []:
        entry = dict(entry)
        if entry.get("type") == kind:
            found = True
            since = entry.get("lastTransitionTime") if entry.get("status") == value else now
            entry.update(status=value, reason=reason, message=message, lastTransitionTime=since)
            if extra:
                entry.update(extra)
        result.append(entry)
    if not found:
        entry = {"type": kind, "status": value, "reason": reason, "message": message,
                 "lastTransitionTime": now}
        if extra:
            entry.update(extra)
        result.append(entry)
    return result


# ----------------------------------------------------------------------------- writes


def delete_quietly(store: ObjectStore, key: ResourceKey, name: str, namespace: str = "") -> None:
    """Delete an object; already gone is fine (another actor may have been first)."""
    try:
        store.delete(key[0], key[1], name, namespace)
    except ApiError as exc:
        if exc.code != 404:
            raise


def patch_quietly(store: ObjectStore, key: ResourceKey, obj: Mapping[str, Any], body: Obj, *,
                  subresource: Literal["", "status"] = "") -> None:
    """Patch an object (or its status); already gone is fine, as for delete_quietly."""
    try:
        store.patch(key[0], key[1], name_of(obj), body, namespace=namespace_of(obj),
                    subresource=subresource)
    except ApiError as exc:
        if exc.code != 404:
            raise


def replace_status(store: ObjectStore, key: ResourceKey, obj: Obj, status: Obj) -> Obj | None:
    """Replace an object's ``status`` (an update of ``/status`` at the object's
    resourceVersion): the object as stored (``obj`` itself when the status is unchanged),
    None when it is gone or changed meanwhile, which the next pass sees as it is then."""
    if status == (obj.get("status") or {}):
        return obj
    try:
        return store.update_status(key[0], key[1], {**obj, "status": status},
                                   namespace=namespace_of(obj) or None)
    except ApiError as exc:
        if exc.code in (404, 409):
            return None
        raise


def record_event(
    store: ObjectStore,
    clock: SimClock,
    involved: Mapping[str, Any],
    *,
    reason: str,
    message: str,
    event_type: str = "Normal",
    component: str,
    action: str = "",
) -> Obj | None:
    """Create a core/v1 Event about ``involved``, once per (object, reason, message).

    The name is derived from the object's uid, the reason and the message, so a
    repeated call (a later reconcile pass) finds the Event already there and
    creates nothing: the return value is the new Event, or None when it existed.
    """
    namespace = namespace_of(involved) or "default"
    name = f"{name_of(involved)}.{short_digest(uid_of(involved), reason, message)}"
    now = timestamp(clock)
    event: Obj = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion", "v1"),
            "kind": involved.get("kind", ""),
            "name": name_of(involved),
            "namespace": namespace_of(involved) or None,
            "uid": uid_of(involved),
            "resourceVersion": str(meta(involved).get("resourceVersion", "")),
        },
        "reason": reason,
        "message": message,
        "type": event_type,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": f"{component}-sandbox",
        "firstTimestamp": now,
        "lastTimestamp": now,
        "eventTime": micro_timestamp(clock),
        "count": 1,
    }
    if action:
        event["action"] = action
    if event["involvedObject"]["namespace"] is None:
        del event["involvedObject"]["namespace"]
    try:
        return store.create(EVENTS[0], EVENTS[1], event, namespace=namespace)
    except ApiError:  # 409: recorded before; 404/403: its namespace is gone or going
        return None
