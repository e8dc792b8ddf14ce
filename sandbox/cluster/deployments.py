"""The Deployment controller (apps/v1): ReplicaSets per template, rolling updates.

It does what kube-controller-manager's does, in the places a rollout watcher
looks (see :mod:`sandbox.cluster.rollout` for the rules it shares):

* one ReplicaSet per distinct pod template, named ``<deployment>-<pod-template-hash>``,
  with that hash in its labels, selector and template, the annotations
  ``deployment.kubernetes.io/revision`` / ``desired-replicas`` / ``max-replicas``
  and a controller owner reference. The ReplicaSet whose template equals the
  Deployment's is the *new* one; changing the template back to an earlier one
  (a rollback) makes that earlier ReplicaSet the new one again, with the next
  revision number (the old number goes to ``revision-history``). The
  Deployment's own ``revision`` annotation follows its new ReplicaSet;
* ``RollingUpdate``: the new ReplicaSet grows while all ReplicaSets together
  stay within ``replicas + maxSurge``; old ones shrink — unhealthy (unavailable)
  pods first — only while ``replicas - maxUnavailable`` pods stay available.
  With ``maxSurge: 1, maxUnavailable: 0`` an old pod goes only after a new one
  is available (Ready for ``minReadySeconds``), so a version that never becomes
  ready leaves the old pods serving. ``Recreate``: old ReplicaSets go to 0 first;
* a change of ``replicas`` resizes the new ReplicaSet the same way, so pods
  added by scaling (or the HPA) always come from the current template;
* status: ``observedGeneration``, ``replicas``, ``updatedReplicas``,
  ``readyReplicas``, ``availableReplicas``, ``unavailableReplicas`` (zero
  counts omitted, as the API does), condition ``Available``
  (``MinimumReplicasAvailable`` / ``MinimumReplicasUnavailable``) and
  ``Progressing`` (``NewReplicaSetCreated``, ``FoundNewReplicaSet``,
  ``ReplicaSetUpdated`` while progressing, ``NewReplicaSetAvailable`` when
  complete, False with ``ProgressDeadlineExceeded`` once no progress was seen
  for ``progressDeadlineSeconds`` on the simulated clock). Old ReplicaSets
  beyond ``revisionHistoryLimit`` are deleted once a rollout completes.

Deployments the ``skip`` predicate claims are left alone (the controller managers
of :mod:`sandbox.cluster.managers` keep their own status).

Not simulated: proportional scaling of several ReplicaSets mid-rollout, pausing
(a paused Deployment only gets its status), hash collisions, adoption.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from sandbox.cluster.objects import (
    ANNOTATION_REVISION,
    APPS_API_VERSION,
    DEPLOYMENTS,
    LABEL_POD_TEMPLATE_HASH,
    REPLICASETS,
    Obj,
    annotations_of,
    children_by_owner,
    delete_quietly,
    deleting,
    find_condition,
    meta,
    name_of,
    namespace_of,
    owner_reference,
    parse_timestamp,
    patch_quietly,
    record_event,
    timestamp,
    uid_of,
)
from sandbox.cluster.rollout import (
    COMPLETE,
    TIMED_OUT,
    RolloutSpec,
    deployment_complete,
    deployment_progressing,
    equal_ignoring_hash,
    revision_of,
    set_condition,
    template_hash,
    timed_out,
)
from sandbox.common.clock import SimClock
from sandbox.kubeapi import ApiError, ObjectStore

__all__ = ["DeploymentController"]

ANNOTATION_DESIRED = "deployment.kubernetes.io/desired-replicas"
ANNOTATION_MAX = "deployment.kubernetes.io/max-replicas"
ANNOTATION_HISTORY = "deployment.kubernetes.io/revision-history"
COMPONENT = "deployment-controller"
_STATUS_COUNTS = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
                  "unavailableReplicas")


def _replicas(rs: Mapping[str, Any]) -> int:
    return int((rs.get("spec") or {}).get("replicas") or 0)


def _status(rs: Mapping[str, Any], key: str) -> int:
    return int((rs.get("status") or {}).get(key) or 0)


def _oldest_first(sets: list[Obj]) -> list[Obj]:
    return sorted(sets, key=lambda rs: (str(meta(rs).get("creationTimestamp", "")),
                                        name_of(rs)))


class DeploymentController:
    """Rolls Deployments out through ReplicaSets; see the module docstring."""

    def __init__(self, store: ObjectStore, clock: SimClock, *,
                 skip: Callable[[Obj], bool] | None = None) -> None:
        self.store = store
        self.clock = clock
        self._skip = skip or (lambda deployment: False)

    def reconcile(self) -> float | None:
        """One sweep; returns when (simulated time) a progress deadline next expires."""
        by_owner = children_by_owner(self.store.list(*REPLICASETS), "Deployment")
        next_due: float | None = None
        for deployment in self.store.list(*DEPLOYMENTS):
            if deleting(deployment) or not (deployment.get("spec") or {}).get("selector") \
                    or self._skip(deployment):
                continue
            due = self.reconcile_deployment(deployment, by_owner.get(uid_of(deployment), []))
            if due is not None and (next_due is None or due < next_due):
                next_due = due
        return next_due

    def reconcile_deployment(self, deployment: Obj, sets: list[Obj]) -> float | None:
        spec = RolloutSpec.of(deployment)
        template: Obj = (deployment.get("spec") or {}).get("template") or {}
        now = timestamp(self.clock)
        conditions: list[Obj] = list((deployment.get("status") or {}).get("conditions") or [])
        new = next((rs for rs in sets if equal_ignoring_hash(
            (rs.get("spec") or {}).get("template") or {}, template)), None)
        old = _oldest_first([rs for rs in sets if rs is not new])
        newest_old = max((revision_of(rs) for rs in old), default=0)
        if not spec.paused:
            if new is None:
                new = self._create(deployment, spec, old, newest_old + 1)
                if new is not None and spec.progress_deadline is not None:
                    conditions = set_condition(
                        conditions, "Progressing", True, "NewReplicaSetCreated",
                        f'Created new replica set "{name_of(new)}"', now)
            else:
                if revision_of(new) <= newest_old:
                    self._bump_revision(new, newest_old + 1)
                if spec.progress_deadline is not None \
                        and find_condition(conditions, "Progressing") is None:
                    conditions = set_condition(
                        conditions, "Progressing", True, "FoundNewReplicaSet",
                        f'Found new replica set "{name_of(new)}"', now)
            if new is not None:
                self._set_revision(deployment, str(revision_of(new)))
                if spec.recreate:
                    self._recreate(deployment, spec, new, old)
                else:
                    self._rolling(deployment, spec, new, old)
        return self._sync_status(deployment, spec, new, old, conditions)

    # ------------------------------------------------------------------ replica sets

    def _create(self, deployment: Obj, spec: RolloutSpec, old: list[Obj],
                revision: int) -> Obj | None:
        template: Obj = copy.deepcopy((deployment.get("spec") or {}).get("template") or {})
        digest = template_hash(template)
        template.setdefault("metadata", {}).setdefault("labels", {})
        template["metadata"]["labels"][LABEL_POD_TEMPLATE_HASH] = digest
        selector: Obj = copy.deepcopy((deployment.get("spec") or {}).get("selector") or {})
        selector.setdefault("matchLabels", {})[LABEL_POD_TEMPLATE_HASH] = digest
        current = sum(_replicas(rs) for rs in old)
        replicas = 0 if spec.recreate else max(0, min(spec.replicas,
                                                      spec.replicas + spec.max_surge - current))
        body: Obj = {
            "apiVersion": APPS_API_VERSION,
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{name_of(deployment)}-{digest}",
                "namespace": namespace_of(deployment),
                "labels": dict(template["metadata"]["labels"]),
                "annotations": {
                    ANNOTATION_REVISION: str(revision),
                    ANNOTATION_DESIRED: str(spec.replicas),
                    ANNOTATION_MAX: str(spec.replicas + spec.max_surge),
                },
                "ownerReferences": [owner_reference(deployment, APPS_API_VERSION,
                                                    "Deployment")],
            },
            "spec": {"replicas": replicas, "minReadySeconds": spec.min_ready_seconds,
                     "selector": selector, "template": template},
        }
        try:
            created = self.store.create(*REPLICASETS, body, namespace=namespace_of(deployment))
        except ApiError as exc:
            if exc.code not in (403, 404, 409, 422):
                raise
            return None
        self._event(deployment, f"Scaled up replica set {name_of(created)} from 0 to "
                                f"{replicas}")
        return created

    def _bump_revision(self, rs: Obj, revision: int) -> None:
        annotations = annotations_of(rs)
        history = [h for h in (annotations.get(ANNOTATION_HISTORY) or "").split(",") if h]
        history.append(str(revision_of(rs)))
        body = {"metadata": {"annotations": {ANNOTATION_REVISION: str(revision),
                                             ANNOTATION_HISTORY: ",".join(history)}}}
        patch_quietly(self.store, REPLICASETS, rs, body)
        rs.setdefault("metadata", {}).setdefault("annotations", {})[ANNOTATION_REVISION] = \
            str(revision)

    def _set_revision(self, deployment: Obj, revision: str) -> None:
        if annotations_of(deployment).get(ANNOTATION_REVISION) != revision:
            patch_quietly(self.store, DEPLOYMENTS, deployment,
                          {"metadata": {"annotations": {ANNOTATION_REVISION: revision}}})

    def _scale(self, deployment: Obj, spec: RolloutSpec, rs: Obj, replicas: int) -> None:
        before = _replicas(rs)
        if before == replicas:
            return
        patch_quietly(self.store, REPLICASETS, rs, {
            "metadata": {"annotations": {ANNOTATION_DESIRED: str(spec.replicas),
                                         ANNOTATION_MAX: str(spec.replicas + spec.max_surge)}},
            "spec": {"replicas": replicas}})
        rs.setdefault("spec", {})["replicas"] = replicas
        direction = "up" if replicas > before else "down"
        self._event(deployment, f"Scaled {direction} replica set {name_of(rs)} from {before} "
                                f"to {replicas}")

    def _event(self, deployment: Obj, message: str) -> None:
        record_event(self.store, self.clock, deployment, reason="ScalingReplicaSet",
                     message=message, component=COMPONENT)

    # ------------------------------------------------------------------ strategies

    def _rolling(self, deployment: Obj, spec: RolloutSpec, new: Obj, old: list[Obj]) -> None:
        """One step of reconcileNewReplicaSet, else of reconcileOldReplicaSets."""
        everything = [*old, new]
        if _replicas(new) > spec.replicas:
            self._scale(deployment, spec, new, spec.replicas)
            return
        if _replicas(new) < spec.replicas:
            current = sum(_replicas(rs) for rs in everything)
            room = spec.replicas + spec.max_surge - current
            if room > 0:
                self._scale(deployment, spec, new,
                            _replicas(new) + min(room, spec.replicas - _replicas(new)))
                return
        active = [rs for rs in old if _replicas(rs) > 0]
        if not active:
            return
        min_available = spec.replicas - spec.max_unavailable
        new_unavailable = _replicas(new) - _status(new, "availableReplicas")
        room = sum(_replicas(rs) for rs in everything) - min_available - new_unavailable
        if room <= 0:
            return
        cleaned = 0
        for rs in active:  # unhealthy replicas first: they serve nobody
            unhealthy = _replicas(rs) - _status(rs, "availableReplicas")
            if cleaned >= room:
                break
            if unhealthy <= 0:
                continue
            down = min(room - cleaned, unhealthy)
            self._scale(deployment, spec, rs, _replicas(rs) - down)
            cleaned += down
        surplus = sum(_status(rs, "availableReplicas") for rs in everything) - min_available
        for rs in active:
            if surplus <= 0:
                break
            down = min(_replicas(rs), surplus)
            if down > 0:
                self._scale(deployment, spec, rs, _replicas(rs) - down)
                surplus -= down

    def _recreate(self, deployment: Obj, spec: RolloutSpec, new: Obj, old: list[Obj]) -> None:
        active = [rs for rs in old if _replicas(rs) > 0]
        for rs in active:
            self._scale(deployment, spec, rs, 0)
        if active or any(_status(rs, "replicas") > 0 for rs in old):
            return  # old pods still run: Recreate waits for them
        self._scale(deployment, spec, new, spec.replicas)

    # ------------------------------------------------------------------ status

    def _sync_status(self, deployment: Obj, spec: RolloutSpec, new: Obj | None,
                     old: list[Obj], conditions: list[Obj]) -> float | None:
        everything = [*old, new] if new is not None else old
        now_text, now = timestamp(self.clock), self.clock.time()
        available = sum(_status(rs, "availableReplicas") for rs in everything)
        counts = {
            "replicas": sum(_status(rs, "replicas") for rs in everything),
            "updatedReplicas": _status(new, "replicas") if new is not None else 0,
            "readyReplicas": sum(_status(rs, "readyReplicas") for rs in everything),
            "availableReplicas": available,
            "unavailableReplicas": max(0, sum(_replicas(rs) for rs in everything) - available),
        }
        generation = int(meta(deployment).get("generation") or 1)
        status: Obj = {"observedGeneration": generation,
                       **{k: v for k, v in counts.items() if v}}
        if available >= spec.replicas - spec.max_unavailable:
            conditions = set_condition(conditions, "Available", True, "MinimumReplicasAvailable",
                                       "Deployment has minimum availability.", now_text)
        else:
            conditions = set_condition(conditions, "Available", False,
                                       "MinimumReplicasUnavailable",
                                       "Deployment does not have minimum availability.",
                                       now_text)
        conditions = self._progress(deployment, spec, new, status, conditions, now_text, now)
        status["conditions"] = conditions
        stored: Obj = deployment.get("status") or {}
        if status != {k: v for k, v in stored.items() if k in status or k in _STATUS_COUNTS}:
            body = {"status": {**{k: None for k in _STATUS_COUNTS}, **status}}
            patch_quietly(self.store, DEPLOYMENTS, deployment, body, subresource="status")
        if deployment_complete(spec.replicas, status, generation):
            self._clean_up(spec, old)
        progressing = find_condition(conditions, "Progressing")
        if spec.progress_deadline is None or progressing is None \
                or progressing.get("reason") in (COMPLETE, TIMED_OUT):
            return None
        since = parse_timestamp(progressing.get("lastUpdateTime"))
        return None if since is None else since + spec.progress_deadline + 1

    def _progress(self, deployment: Obj, spec: RolloutSpec, new: Obj | None, status: Obj,
                  conditions: list[Obj], now_text: str, now: float) -> list[Obj]:
        """syncRolloutStatus: complete, progressing, or timed out."""
        if spec.progress_deadline is None:
            return [c for c in conditions if c.get("type") != "Progressing"]
        current = find_condition(conditions, "Progressing")
        if status.get("replicas") == status.get("updatedReplicas") and current is not None \
                and current.get("reason") == COMPLETE:
            return conditions
        subject = f'ReplicaSet "{name_of(new)}"' if new is not None \
            else f'Deployment "{name_of(deployment)}"'
        if deployment_complete(spec.replicas, status, status["observedGeneration"]):
            return set_condition(conditions, "Progressing", True, COMPLETE,
                                 f"{subject} has successfully progressed.", now_text)
        if deployment_progressing(deployment.get("status") or {}, status):
            return set_condition(conditions, "Progressing", True, "ReplicaSetUpdated",
                                 f"{subject} is progressing.", now_text, progress=True)
        if timed_out(conditions, spec.progress_deadline, now):
            return set_condition(conditions, "Progressing", False, TIMED_OUT,
                                 f"{subject} has timed out progressing.", now_text)
        return conditions

    def _clean_up(self, spec: RolloutSpec, old: list[Obj]) -> None:
        """Delete the oldest idle ReplicaSets beyond ``revisionHistoryLimit``."""
        idle = sorted((rs for rs in old if _replicas(rs) == 0 and _status(rs, "replicas") == 0
                       and not deleting(rs)), key=revision_of)
        for rs in idle[: max(0, len(idle) - spec.revision_history_limit)]:
            delete_quietly(self.store, REPLICASETS, name_of(rs), namespace_of(rs))
