"""A kube-scheduler stand-in that binds Pending pods to Nodes.

Per node it applies the default scheduler's filters in its order: node
unschedulable or being deleted, taints (a not-Ready node counts as tainted
``node.kubernetes.io/not-ready``; pods requesting ``google.com/tpu`` or
``nvidia.com/gpu`` tolerate that resource's taint, as GKE's webhook and its
ExtendedResourceToleration admission add those tolerations), nodeSelector and
required node affinity, and free resources (allocatable minus the requests of
unfinished pods bound there, ``google.com/tpu`` and ``nvidia.com/gpu`` included).

Pods of one Job are placed together ("gang"): a Job's pending pods are bound only
when all of them fit into one topology domain (TPU multi-host slices start
together). The domain is the node label named by the pods' JobSet annotation
``alpha.jobset.sigs.k8s.io/exclusive-topology`` (normally
``cloud.google.com/gke-nodepool``), else, for pods requesting ``google.com/tpu``,
the node pool. With exclusive topology a domain holds the pods of one Job only.

Bound pods get ``spec.nodeName``, phase Running, ``startTime``, conditions
PodScheduled/Initialized/ContainersReady/Ready and running container statuses —
except pods the ``starts_itself`` predicate claims (those whose containers run as
processes, :mod:`sandbox.cluster.kubelet`): they get ``spec.nodeName``,
PodScheduled, ``startTime`` and their IPs, and stay Pending for that kubelet.
Pods that cannot be bound stay Pending with condition PodScheduled False, reason
Unschedulable and the scheduler's message (``0/3 nodes are available: 3 node(s)
didn't match Pod's node affinity/selector. preemption: ...``); the first time,
a ``FailedScheduling`` Event is recorded and the :meth:`KubeScheduler.on_unschedulable`
hooks are called.

Not simulated: scoring (nodes are tried by name), preemption, pod (anti-)affinity
other than exclusive topology, topology spread, volumes, host ports.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sandbox.cluster.objects import (
    ANNOTATION_EXCLUSIVE,
    GPU_RESOURCE,
    LABEL_JOB_KEY,
    LABEL_NODEPOOL,
    NODES,
    PODS,
    TPU_RESOURCE,
    Obj,
    annotations_of,
    condition,
    controller_uid,
    deleting,
    is_true,
    labels_of,
    meta,
    name_of,
    namespace_of,
    parse_quantity,
    patch_quietly,
    pod_active,
    pod_requests,
    record_event,
    short_digest,
    timestamp,
    uid_of,
)
from sandbox.common.clock import SimClock
from sandbox.kubeapi import ApiError, ObjectStore

__all__ = ["KubeScheduler", "UnschedulableHook", "taint_tolerated"]

log = logging.getLogger(__name__)

SCHEDULER_NAME = "default-scheduler"
UnschedulableHook = Callable[[Obj, Obj], None]

REASON_UNSCHEDULABLE_NODE = "node(s) were unschedulable"
REASON_SELECTOR = "node(s) didn't match Pod's node affinity/selector"
REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_TOO_MANY_PODS = "Too many pods"


def taint_tolerated(taint: Mapping[str, Any], tolerations: Iterable[Mapping[str, Any]]) -> bool:
    """Whether one of ``tolerations`` tolerates ``taint`` (the API's matching rules)."""
    for toleration in tolerations:
        effect = toleration.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key")
        operator = toleration.get("operator") or "Equal"
        if not key:
            if operator == "Exists":
                return True
            continue
        if key != taint.get("key"):
            continue
        if operator == "Exists" or (toleration.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _match_expression(labels: Mapping[str, str], expr: Mapping[str, Any]) -> bool:
    key = str(expr.get("key", ""))
    operator = expr.get("operator")
    values = [str(v) for v in expr.get("values") or []]
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt") and key in labels and values:
        try:
            left, right = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return left > right if operator == "Gt" else left < right
    return False


def selector_matches(pod_spec: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a pod spec's nodeSelector and required node affinity admit these labels."""
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    return any(
        all(_match_expression(labels, expr) for expr in term.get("matchExpressions") or [])
        for term in terms
    )


def _ready(node: Mapping[str, Any]) -> bool:
    return is_true(node, "Ready")


def _taint_text(taint: Mapping[str, Any]) -> str:
    return f"{{{taint.get('key', '')}: {taint.get('value', '')}}}"


@dataclass
class _NodeState:
    node: Obj
    allocatable: dict[str, float]
    used: dict[str, float] = field(default_factory=dict)
    pods: int = 0

    @property
    def name(self) -> str:
        return name_of(self.node)

    def label(self, key: str) -> str | None:
        return labels_of(self.node).get(key)

    def fits(self, requests: Mapping[str, float]) -> str | None:
        """None when the requests fit, else the first missing resource's reason."""
        if self.pods + 1 > self.allocatable.get("pods", 110.0):
            return REASON_TOO_MANY_PODS
        for resource, amount in sorted(requests.items()):
            if amount <= 0:
                continue
            free = self.allocatable.get(resource, 0.0) - self.used.get(resource, 0.0)
            if amount > free + 1e-9:
                return f"Insufficient {resource}"
        return None

    def take(self, requests: Mapping[str, float]) -> None:
        self.pods += 1
        for resource, amount in requests.items():
            self.used[resource] = self.used.get(resource, 0.0) + amount


@dataclass
class _Group:
    """The pending pods of one Job (or one lone pod)."""

    key: str
    pods: list[Obj]
    job_key: str
    domain_key: str | None
    exclusive: bool

    @property
    def template(self) -> Obj:
        return self.pods[0]


class KubeScheduler:
    """Binds Pending pods; see the module docstring."""

    def __init__(self, store: ObjectStore, clock: SimClock, *,
                 starts_itself: Callable[[Obj], bool] | None = None) -> None:
        self.store = store
        self.clock = clock
        self._hooks: list[UnschedulableHook] = []
        self._starts_itself = starts_itself or (lambda pod: False)

    def on_unschedulable(self, callback: UnschedulableHook) -> None:
        """Call ``callback(pod, failed_scheduling_event)`` once per newly unschedulable pod."""
        self._hooks.append(callback)

    # ------------------------------------------------------------------ reconcile

    def reconcile(self) -> None:
        nodes = {name_of(n): _NodeState(n, {k: parse_quantity(v) for k, v in
                                             ((n.get("status") or {}).get("allocatable")
                                              or {}).items()})
                 for n in self.store.list(*NODES)}
        pods = self.store.list(*PODS)
        occupants: dict[str, list[Obj]] = {}  # node -> active pods bound there
        pending: list[Obj] = []
        for pod in pods:
            if not pod_active(pod):
                continue
            node_name = (pod.get("spec") or {}).get("nodeName")
            if node_name:
                state = nodes.get(str(node_name))
                if state is not None:
                    state.take(pod_requests(pod.get("spec") or {}))
                    occupants.setdefault(state.name, []).append(pod)
                    if (pod.get("status") or {}).get("phase", "Pending") == "Pending" \
                            and not is_true(pod, "PodScheduled"):
                        self._start(pod, state)  # created with nodeName: the kubelet runs it
            elif self._ours(pod):
                pending.append(pod)
        for group in self._groups(pending):
            self._schedule(group, nodes, occupants)

    @staticmethod
    def _ours(pod: Obj) -> bool:
        spec = pod.get("spec") or {}
        return (spec.get("schedulerName") or SCHEDULER_NAME) == SCHEDULER_NAME \
            and not spec.get("schedulingGates")

    def _groups(self, pending: list[Obj]) -> list[_Group]:
        groups: dict[str, _Group] = {}
        for pod in pending:
            job_uid = controller_uid(pod, "Job")
            key = f"job/{job_uid}" if job_uid else f"pod/{uid_of(pod)}"
            group = groups.get(key)
            if group is None:
                exclusive = annotations_of(pod).get(ANNOTATION_EXCLUSIVE)
                requests_tpu = pod_requests(pod.get("spec") or {}).get(TPU_RESOURCE, 0) > 0
                domain = exclusive or (LABEL_NODEPOOL if requests_tpu else None)
                job_key = labels_of(pod).get(LABEL_JOB_KEY) or key
                group = groups[key] = _Group(key, [], job_key, domain, bool(exclusive))
            group.pods.append(pod)

        def order(group: _Group) -> tuple[int, str, str]:
            first = min(group.pods, key=lambda p: (str(meta(p).get("creationTimestamp", "")),
                                                   name_of(p)))
            priority = int((first.get("spec") or {}).get("priority") or 0)
            return (-priority, str(meta(first).get("creationTimestamp", "")), name_of(first))

        for group in groups.values():
            group.pods.sort(key=name_of)
        return sorted(groups.values(), key=order)

    # ------------------------------------------------------------------ placement

    def _filter(self, pod: Obj, state: _NodeState) -> str | None:
        """The first failing filter's reason for ``pod`` on this node (None: it passes)."""
        node = state.node
        spec: Obj = pod.get("spec") or {}
        if deleting(node) or (node.get("spec") or {}).get("unschedulable"):
            return REASON_UNSCHEDULABLE_NODE
        tolerations = list(spec.get("tolerations") or [])
        requests = pod_requests(spec)
        for resource in (TPU_RESOURCE, GPU_RESOURCE):
            if requests.get(resource, 0) > 0:
                tolerations.append({"key": resource, "operator": "Exists"})
        taints = list((node.get("spec") or {}).get("taints") or [])
        if not _ready(node):
            taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
        for taint in taints:
            if taint.get("effect") in ("NoSchedule", "NoExecute") \
                    and not taint_tolerated(taint, tolerations):
                return f"node(s) had untolerated taint {_taint_text(taint)}"
        if not selector_matches(spec, labels_of(node)):
            return REASON_SELECTOR
        return state.fits(requests)

    def _schedule(self, group: _Group, nodes: dict[str, _NodeState],
                  occupants: dict[str, list[Obj]]) -> None:
        reasons: dict[str, str] = {}
        candidates: list[_NodeState] = []
        for state in sorted(nodes.values(), key=lambda s: s.name):
            reason = self._filter(group.template, state)
            if reason is None:
                candidates.append(state)
            else:
                reasons[state.name] = reason
        placement = self._place(group, candidates, nodes, occupants, reasons) or []
        placed = set()
        for pod, state in placement:
            state.take(pod_requests(pod.get("spec") or {}))
            occupants.setdefault(state.name, []).append(pod)
            placed.add(uid_of(pod))
            self._bind(pod, state)
        rest = [pod for pod in group.pods if uid_of(pod) not in placed]
        if rest and placement:  # partly placed: the others found the nodes full
            for state in nodes.values():
                reasons[state.name] = self._filter(rest[0], state) or REASON_TOO_MANY_PODS
        for pod in rest:
            self._unschedulable(pod, self._message(len(nodes), reasons))

    def _place(
        self,
        group: _Group,
        candidates: list[_NodeState],
        nodes: Mapping[str, _NodeState],
        occupants: Mapping[str, list[Obj]],
        reasons: dict[str, str],
    ) -> list[tuple[Obj, _NodeState]] | None:
        if group.domain_key is None:
            return self._fit(group.pods, candidates, partial=True)
        domains: dict[str, list[_NodeState]] = {}
        for state in candidates:
            value = state.label(group.domain_key)
            if value is None:
                reasons[state.name] = REASON_SELECTOR
            else:
                domains.setdefault(value, []).append(state)
        required = self._sibling_domain(group, nodes, occupants)
        for value, members in sorted(domains.items()):
            if required is not None and value != required:
                reasons.update((s.name, REASON_AFFINITY) for s in members)
                continue
            whole = [s for s in nodes.values() if s.label(group.domain_key) == value]
            if self._barred(group, whole, occupants):
                reasons.update((s.name, REASON_ANTI_AFFINITY) for s in members)
                continue
            placement = self._fit(group.pods, members, partial=False)
            if placement is not None:
                return placement
            gang = (f"node(s) were in a {group.domain_key} domain without room for all "
                    f"{len(group.pods)} pending pod(s) of the job")
            reasons.update((s.name, gang) for s in members)
        return None

    def _sibling_domain(self, group: _Group, nodes: Mapping[str, _NodeState],
                        occupants: Mapping[str, list[Obj]]) -> str | None:
        """The domain where pods of the same Job already run, if any."""
        assert group.domain_key is not None
        for node_name, bound in occupants.items():
            if any(self._job_key(pod) == group.job_key for pod in bound):
                return nodes[node_name].label(group.domain_key)
        return None

    @staticmethod
    def _job_key(pod: Obj) -> str:
        job_uid = controller_uid(pod, "Job")
        fallback = f"job/{job_uid}" if job_uid else f"pod/{uid_of(pod)}"
        return labels_of(pod).get(LABEL_JOB_KEY) or fallback

    def _barred(self, group: _Group, domain: list[_NodeState],
                occupants: Mapping[str, list[Obj]]) -> bool:
        """Exclusive topology: the domain runs pods of another Job (either side exclusive)."""
        for state in domain:
            for pod in occupants.get(state.name, []):
                other = self._job_key(pod)
                if other == group.job_key:
                    continue
                if group.exclusive and LABEL_JOB_KEY in labels_of(pod):
                    return True
                if annotations_of(pod).get(ANNOTATION_EXCLUSIVE) == group.domain_key:
                    return True
        return False

    @staticmethod
    def _fit(pods: list[Obj], nodes: list[_NodeState], *,
             partial: bool) -> list[tuple[Obj, _NodeState]] | None:
        """First-fit ``pods`` onto ``nodes`` on a scratch copy of their usage."""
        scratch = {s.name: _NodeState(s.node, s.allocatable, dict(s.used), s.pods) for s in nodes}
        placement: list[tuple[Obj, _NodeState]] = []
        for pod in pods:
            requests = pod_requests(pod.get("spec") or {})
            for state in nodes:
                trial = scratch[state.name]
                if trial.fits(requests) is None:
                    trial.take(requests)
                    placement.append((pod, state))
                    break
            else:
                if not partial:
                    return None
        return placement if placement else None

    @staticmethod
    def _message(total: int, reasons: Mapping[str, str]) -> str:
        if total == 0:
            return "no nodes available to schedule pods"
        counts: dict[str, int] = {}
        for reason in reasons.values():
            counts[reason] = counts.get(reason, 0) + 1
        detail = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
        return (f"0/{total} nodes are available: {detail}. preemption: 0/{total} nodes are "
                f"available: {total} Preemption is not helpful for scheduling.")

    # ------------------------------------------------------------------ writes

    def _bind(self, pod: Obj, state: _NodeState) -> None:
        try:
            bound = self.store.patch(*PODS, name_of(pod), {"spec": {"nodeName": state.name}},
                                     namespace=namespace_of(pod))
        except ApiError as exc:
            if exc.code in (404, 409, 422):
                return
            raise
        self._start(bound, state)

    def _start(self, pod: Obj, state: _NodeState) -> None:
        """What the kubelet reports once the pod's containers run."""
        now = timestamp(self.clock)
        status: Obj = dict(pod.get("status") or {})
        conditions = status.get("conditions")
        handed_off = self._starts_itself(pod)
        if not handed_off:
            for kind in ("PodReadyToStartContainers", "Initialized", "ContainersReady",
                         "Ready"):
                conditions = condition(conditions, kind, True, "", "", now)
        conditions = condition(conditions, "PodScheduled", True, "", "", now)
        for entry in conditions:
            if not entry.get("reason"):
                entry.pop("reason", None)
            if not entry.get("message"):
                entry.pop("message", None)
        addresses = (state.node.get("status") or {}).get("addresses") or []
        host_ip = next((a.get("address") for a in addresses if a.get("type") == "InternalIP"),
                       "10.0.0.1")
        digest = short_digest(uid_of(pod), length=6)
        pod_ip = f"10.{int(digest[:2], 16)}.{int(digest[2:4], 16)}.{int(digest[4:], 16) or 1}"
        containers = (pod.get("spec") or {}).get("containers") or []

        def image_id(image: str) -> str:
            return f"{image}@sha256:{short_digest(image, length=64)}"

        def container_id(name: str) -> str:
            return f"containerd://{short_digest(uid_of(pod), name, length=64)}"

        status.update(
            phase="Pending" if handed_off else "Running",
            startTime=status.get("startTime") or now,
            hostIP=host_ip,
            hostIPs=[{"ip": host_ip}],
            podIP=pod_ip,
            podIPs=[{"ip": pod_ip}],
            conditions=conditions,
        )
        if handed_off:
            patch_quietly(self.store, PODS, pod, {"status": status}, subresource="status")
            return
        status.update(
            containerStatuses=[{
                "name": c.get("name", ""),
                "image": c.get("image", ""),
                "imageID": image_id(str(c.get("image", ""))),
                "containerID": container_id(str(c.get("name", ""))),
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            } for c in containers],
        )
        patch_quietly(self.store, PODS, pod, {"status": status}, subresource="status")

    def _unschedulable(self, pod: Obj, message: str) -> None:
        now = timestamp(self.clock)
        status: Obj = dict(pod.get("status") or {})
        previous = next((c for c in status.get("conditions") or []
                         if c.get("type") == "PodScheduled"), None)
        if previous is not None and previous.get("status") == "False" \
                and previous.get("message") == message:
            return
        status["phase"] = status.get("phase") or "Pending"
        status["conditions"] = condition(status.get("conditions"), "PodScheduled", False,
                                         "Unschedulable", message, now)
        try:
            updated = self.store.patch(*PODS, name_of(pod), {"status": status},
                                       namespace=namespace_of(pod), subresource="status")
        except ApiError as exc:
            if exc.code == 404:
                return
            raise
        if previous is not None and previous.get("status") == "False":
            return  # already reported: only the message changed
        event = record_event(self.store, self.clock, updated, reason="FailedScheduling",
                             message=message, event_type="Warning", component=SCHEDULER_NAME,
                             action="Scheduling")
        if event is None:
            return
        for hook in list(self._hooks):
            try:
                hook(updated, event)
            except Exception:
                log.exception("unschedulable hook %r failed for pod %s/%s", hook,
                              namespace_of(pod), name_of(pod))
