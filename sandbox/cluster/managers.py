"""The Kueue and JobSet controller managers: started when their Deployments are installed.

On a cluster, ``kubectl apply --server-side -k manifests/controllers`` creates the
Deployments ``kueue-system/kueue-controller-manager`` and
``jobset-system/jobset-controller-manager``; their pods start, answer their readiness
probe (``/readyz``, first probed ``initialDelaySeconds: 5`` after start in both
releases), join the Endpoints of the webhook Services, and the Deployments turn
``Available``. Until then every write their webhooks intercept fails
(:mod:`sandbox.kubeapi.admission`).

:class:`ControllerManagers` is that start-up for the sandbox: a managed Deployment
is unavailable (``Available=False``, ``MinimumReplicasUnavailable``; its Services'
Endpoints list the pod under ``notReadyAddresses``) until ``start_seconds`` simulated
seconds after its creation, then available (``Available=True``,
``MinimumReplicasAvailable``; ``Progressing`` ``NewReplicaSetAvailable``; the pod's
address ready in the Endpoints of every Service of its namespace that selects its
pods, so the webhooks answer). ``start_seconds`` defaults to the readiness probe's
initial delay (``--controller-start-seconds`` of ``python -m sandbox.cluster``).
Tests that need the window in which the webhooks do not answer hold a manager's pod
unready, as a failing readiness probe would: in process with :meth:`hold` (every
manager, until :meth:`release`), or through the API with the annotation
``sandbox.accelops.dev/unready: "true"`` on its Deployment (that manager, until the
annotation goes). A Deployment restored from a saved state, created long ago, is
ready at once: the controllers of a restarted sandbox cluster resume.

Not simulated: the controller pods themselves — the sandbox cluster has no CPU node
pool for them to run on, and the Kueue and JobSet controllers are simulated in
process (:mod:`sandbox.cluster.kueue`, :mod:`sandbox.cluster.jobset`) — so the
Deployment's ReplicaSet and pods do not exist; the generic Deployment and Service
controllers leave these Deployments and their Services to this class.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from sandbox.cluster.objects import (
    DEPLOYMENTS,
    ENDPOINTS,
    SERVICES,
    Obj,
    annotations_of,
    deleting,
    find_condition,
    labels_of,
    meta,
    name_of,
    namespace_of,
    parse_timestamp,
    replace_status,
    timestamp,
    uid_of,
)
from sandbox.cluster.rollout import set_condition, template_hash
from sandbox.common.clock import SimClock
from sandbox.kubeapi import ApiError, ObjectStore

__all__ = ["ANNOTATION_UNREADY", "DEFAULT_START_SECONDS", "MANAGED_DEPLOYMENTS",
           "ControllerManagers"]

# (namespace, name) of the controller Deployments of the pinned releases.
MANAGED_DEPLOYMENTS = frozenset({
    ("kueue-system", "kueue-controller-manager"),
    ("jobset-system", "jobset-controller-manager"),
})
# The managers' readinessProbe.initialDelaySeconds in both release manifests.
DEFAULT_START_SECONDS = 5.0
# On a manager's Deployment: its pod is held unready (a test's readiness probe failing).
ANNOTATION_UNREADY = "sandbox.accelops.dev/unready"


def _template(deployment: Mapping[str, Any]) -> Obj:
    return dict((deployment.get("spec") or {}).get("template") or {})


def _selects(service: Mapping[str, Any], deployment: Mapping[str, Any]) -> bool:
    selector = (service.get("spec") or {}).get("selector") or {}
    pod_labels = (_template(deployment).get("metadata") or {}).get("labels") or {}
    return bool(selector) and all(pod_labels.get(k) == v for k, v in selector.items())


def _pod_ip(deployment: Mapping[str, Any]) -> str:
    digest = hashlib.sha256(uid_of(deployment).encode()).digest()
    return f"10.4.{digest[0]}.{max(2, digest[1])}"


def _target_port(port: Mapping[str, Any], deployment: Mapping[str, Any]) -> int:
    """The container port a Service port's ``targetPort`` names on the manager pod."""
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    for container in (_template(deployment).get("spec") or {}).get("containers") or []:
        for declared in container.get("ports") or []:
            if declared.get("name") == target:
                return int(declared.get("containerPort") or 0)
    return int(port.get("port") or 0)


class ControllerManagers:
    """Readiness of the controller Deployments and their Services' Endpoints."""

    def __init__(self, store: ObjectStore, clock: SimClock, *,
                 start_seconds: float = DEFAULT_START_SECONDS) -> None:
        self.store = store
        self.clock = clock
        self.start_seconds = start_seconds
        self.held = False

    # ------------------------------------------------------------------ for tests

    def hold(self) -> None:
        """Hold every manager's pod unready (their readiness probes failing)."""
        self.held = True

    def release(self) -> None:
        """Let the managers become ready, at their start time or the next pass after it."""
        self.held = False

    # ------------------------------------------------------------------ ownership

    def owns_deployment(self, deployment: Mapping[str, Any]) -> bool:
        """Whether the Deployment is a controller manager this class runs."""
        return (namespace_of(deployment), name_of(deployment)) in MANAGED_DEPLOYMENTS

    def owns_service(self, service: Mapping[str, Any]) -> bool:
        """Whether the Service selects a managed Deployment's pods (its Endpoints are ours)."""
        for namespace, name in MANAGED_DEPLOYMENTS:
            if namespace_of(service) != namespace:
                continue
            deployment = self.store.try_get(*DEPLOYMENTS, name, namespace)
            if deployment is not None and _selects(service, deployment):
                return True
        return False

    # ------------------------------------------------------------------ passes

    def ready_at(self, deployment: Mapping[str, Any]) -> float:
        """Simulated time the manager's pod turns ready."""
        created = parse_timestamp(meta(deployment).get("creationTimestamp"))
        return (created if created is not None else self.clock.time()) + self.start_seconds

    def reconcile(self) -> float | None:
        """Sync every managed Deployment; returns when (simulated time) one turns ready."""
        next_due: float | None = None
        now = self.clock.time()
        for namespace, name in sorted(MANAGED_DEPLOYMENTS):
            deployment = self.store.try_get(*DEPLOYMENTS, name, namespace)
            if deployment is None or deleting(deployment):
                continue
            was_ready = find_condition((deployment.get("status") or {}).get("conditions"),
                                       "Available") or {}
            due = self.ready_at(deployment)
            held = self.held or annotations_of(deployment).get(ANNOTATION_UNREADY) == "true"
            ready = not held and (was_ready.get("status") == "True" or now >= due)
            if not ready and not held:
                next_due = due if next_due is None else min(next_due, due)
            self._status(deployment, ready)
            for service in self.store.list(*SERVICES, namespace=namespace):
                if _selects(service, deployment) and not deleting(service):
                    self._endpoints(service, deployment, ready)
        return next_due

    def _status(self, deployment: Obj, ready: bool) -> None:
        replicas = int((deployment.get("spec") or {}).get("replicas", 1) or 0)
        current: Obj = deployment.get("status") or {}
        now = timestamp(self.clock)
        replica_set = f"{name_of(deployment)}-{template_hash(_template(deployment))}"
        conditions = list(current.get("conditions") or [])
        if ready:
            conditions = set_condition(conditions, "Available", True, "MinimumReplicasAvailable",
                                       "Deployment has minimum availability.", now)
            conditions = set_condition(conditions, "Progressing", True, "NewReplicaSetAvailable",
                                       f'ReplicaSet "{replica_set}" has successfully progressed.',
                                       now)
            counts = {"replicas": replicas, "updatedReplicas": replicas,
                      "readyReplicas": replicas, "availableReplicas": replicas}
        else:
            conditions = set_condition(conditions, "Available", False,
                                       "MinimumReplicasUnavailable",
                                       "Deployment does not have minimum availability.", now)
            conditions = set_condition(conditions, "Progressing", True, "ReplicaSetUpdated",
                                       f'ReplicaSet "{replica_set}" is progressing.', now)
            counts = {"replicas": replicas, "updatedReplicas": replicas,
                      "unavailableReplicas": replicas}
        status: Obj = {"observedGeneration": int(meta(deployment).get("generation") or 1),
                       **{k: v for k, v in counts.items() if v}, "conditions": conditions}
        replace_status(self.store, DEPLOYMENTS, deployment, status)

    def _endpoints(self, service: Obj, deployment: Obj, ready: bool) -> None:
        address = {"ip": _pod_ip(deployment),
                   "targetRef": {"kind": "Pod", "namespace": namespace_of(deployment),
                                 "name": f"{name_of(deployment)}-"
                                         f"{template_hash(_template(deployment))}-"
                                         f"{uid_of(deployment)[:5]}"}}
        ports = [{**({"name": p["name"]} if p.get("name") else {}),
                  "port": _target_port(p, deployment),
                  "protocol": str(p.get("protocol") or "TCP")}
                 for p in (service.get("spec") or {}).get("ports") or []]
        subset: Obj = {"addresses" if ready else "notReadyAddresses": [address], "ports": ports}
        name, namespace = name_of(service), namespace_of(service)
        current = self.store.try_get(*ENDPOINTS, name, namespace)
        if current is not None and current.get("subsets") == [subset]:
            return
        body: Obj = {"apiVersion": "v1", "kind": "Endpoints",
                     "metadata": {"name": name, "namespace": namespace,
                                  "labels": labels_of(service)},
                     "subsets": [subset]}
        try:
            if current is None:
                self.store.create(*ENDPOINTS, body, namespace=namespace)
            else:
                self.store.replace(*ENDPOINTS, {**body, "metadata": {
                    **body["metadata"], "resourceVersion": meta(current)["resourceVersion"]}},
                    namespace=namespace)
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise
