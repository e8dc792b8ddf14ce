"""Owner-reference garbage collection, as kube-controller-manager's garbage collector.

An object whose ownerReferences name a JobSet, Job, Deployment or ReplicaSet
that no longer exists (no object of that kind with that uid) is deleted:
deleting a JobSet removes its Jobs, Workload and Service, deleting a Job or a
ReplicaSet removes its Pods, deleting a Deployment its ReplicaSets (background
propagation). Children are listed before owners, so an owner created after its
child was listed is never missed, and an owner collected in a sweep takes its
own children in the same sweep.
"""

from __future__ import annotations

from sandbox.cluster.objects import (
    DEPLOYMENTS,
    JOBS,
    JOBSETS,
    PODS,
    REPLICASETS,
    SERVICES,
    WORKLOADS,
    ResourceKey,
    delete_quietly,
    meta,
    name_of,
    namespace_of,
    uid_of,
)
from sandbox.kubeapi import ObjectStore

__all__ = ["GarbageCollector"]

# Owner kinds the collector knows, and where their objects live.
_OWNER_KINDS: dict[str, ResourceKey] = {"JobSet": JOBSETS, "Job": JOBS,
                                        "Deployment": DEPLOYMENTS, "ReplicaSet": REPLICASETS}
_KIND_OF: dict[ResourceKey, str] = {key: kind for kind, key in _OWNER_KINDS.items()}
# Dependents it looks at, in the order they are judged: owners before their children.
_DEPENDENTS: tuple[ResourceKey, ...] = (SERVICES, WORKLOADS, JOBS, REPLICASETS, PODS)


class GarbageCollector:
    """Deletes dependents of deleted JobSets, Jobs, Deployments and ReplicaSets."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    def collect(self) -> int:
        """One sweep; returns how many objects were deleted."""
        dependents = [(key, obj) for key in _DEPENDENTS for obj in self.store.list(*key)]
        owners = {kind: {uid_of(obj) for obj in self.store.list(*key)}
                  for kind, key in _OWNER_KINDS.items()}
        deleted = 0
        for key, obj in dependents:
            refs = [ref for ref in meta(obj).get("ownerReferences") or []
                    if ref.get("kind") in owners]
            if refs and all(str(ref.get("uid")) not in owners[str(ref["kind"])] for ref in refs):
                delete_quietly(self.store, key, name_of(obj), namespace_of(obj))
                deleted += 1
                if key in _KIND_OF:
                    owners[_KIND_OF[key]].discard(uid_of(obj))
        return deleted
