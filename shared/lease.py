"""A short lock held in a Kubernetes Lease (``coordination.k8s.io/v1``).

Kubernetes has no transactions, so "look, then create" is a race between two
deliveries. A Lease is a lock every client can take atomically: ``create`` succeeds
for one of them, the others get AlreadyExists and wait. A holder that died leaves a
Lease behind; once it is older than its duration (by the API server's clock) the next
client takes it over with a compare-and-swap on its resourceVersion. Release deletes
the Lease with a resourceVersion precondition, so a holder that was too slow never
deletes its successor's lock.

Holds are meant to be short (milliseconds): a waiter polls for a few seconds, then
gives up with :class:`LockHeldError`, a TransientError, so the event is retried.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from shared.errors import AlreadyExistsError, ConflictError, TransientError
from shared.jobspec.labels import LABEL_MANAGED_BY, MANAGED_BY
from shared.kube import LEASES, KubeClient

__all__ = ["LockHeldError", "expired", "hold"]

_POLL_SECONDS = 0.05


class LockHeldError(TransientError):
    """Another live holder has the lock: retry the event later."""


def _micro_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def expired(lease: dict[str, Any], now: float) -> bool:
    """Whether the Lease's holder has outlived its duration (pure). A Lease without a
    readable renew time or duration counts as expired: nobody can be holding it."""
    spec = lease.get("spec") or {}
    try:
        renewed = datetime.fromisoformat(str(spec["renewTime"])).timestamp()
        duration = float(spec["leaseDurationSeconds"])
    except (KeyError, TypeError, ValueError):
        return True
    return renewed + duration < now


def _body(namespace: str, name: str, holder: str, seconds: int, now: float) -> dict[str, Any]:
    stamp = _micro_time(now)
    return {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {LABEL_MANAGED_BY: MANAGED_BY}},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": seconds,
                 "acquireTime": stamp, "renewTime": stamp},
    }


def _try_acquire(kube: KubeClient, namespace: str, name: str, holder: str,
                 seconds: int) -> dict[str, Any] | None:
    """The Lease, now ours; None while someone else holds it."""
    now = kube.server_time() or time.time()
    body = _body(namespace, name, holder, seconds, now)
    try:
        return kube.create(LEASES, body)
    except AlreadyExistsError:
        pass
    current = kube.find(LEASES, name, namespace)
    if current is None or not expired(current, kube.server_time() or time.time()):
        return None
    body["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
    try:
        return kube.replace(LEASES, body)
    except ConflictError:
        return None  # another waiter took it over first


@contextlib.contextmanager
def hold(kube: KubeClient, namespace: str, name: str, *, holder: str, seconds: int,
         wait: float = 5.0) -> Iterator[None]:
    """Hold the Lease ``namespace/name`` for the block.

    ``seconds`` must exceed the longest the block can take (a holder is presumed dead
    after it). Raises LockHeldError after ``wait`` seconds of trying, MissingTargetError
    when the namespace does not exist, the adapter's TransientErrors when the API fails.
    """
    give_up = time.monotonic() + wait
    while (lease := _try_acquire(kube, namespace, name, holder, seconds)) is None:
        if time.monotonic() >= give_up:
            raise LockHeldError(f"lock {namespace}/{name} is held by another delivery")
        time.sleep(_POLL_SECONDS)
    try:
        yield
    finally:
        with contextlib.suppress(ConflictError):  # taken over: it is not ours to delete
            kube.delete(LEASES, name, namespace,
                        resource_version=lease["metadata"].get("resourceVersion"))
