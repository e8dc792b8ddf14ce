"""Owner-reference garbage collection, as kube-controller-manager's garbage collector.

An object whose ownerReferences name a JobSet or a Job that no longer exists (no
object of that kind with that uid) is deleted: deleting a JobSet removes its
Jobs, Workload and Service, and deleting a Job removes its Pods (background
propagation). Children are listed before owners, so an owner created after its
child was listed is never missed.
"""

from __future__ import annotations

from sandbox.cluster.objects import (
    JOBS,
    JOBSETS,
    PODS,
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
_OWNER_KINDS: dict[str, ResourceKey] = {"JobSet": JOBSETS, "Job": JOBS}
# Dependents it looks at, children before their owners.
_DEPENDENTS: tuple[ResourceKey, ...] = (PODS, SERVICES, WORKLOADS, JOBS)


class GarbageCollector:
    """Deletes dependents of deleted JobSets and Jobs."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    def collect(self) -> int:
        """One sweep; returns how many objects were deleted."""
        dependents = [(key, obj) for key in _DEPENDENTS for obj in self.store.list(*key)]
        owners = {kind: {uid_of(obj) for obj in self.store.list(*key)}
                  for kind, key in _OWNER_KINDS.items()}
        deleted = 0
        # Jobs are judged before Pods, so a Job collected now takes its Pods in the same sweep.
        dependents.sort(key=lambda entry: entry[0] == PODS)
        for key, obj in dependents:
            refs = [ref for ref in meta(obj).get("ownerReferences") or []
                    if ref.get("kind") in owners]
            if refs and all(str(ref.get("uid")) not in owners[str(ref["kind"])] for ref in refs):
                delete_quietly(self.store, key, name_of(obj), namespace_of(obj))
                deleted += 1
                if key == JOBS:
                    owners["Job"].discard(uid_of(obj))
        return deleted
