"""The ``scale`` subresource of Deployments and ReplicaSets (``autoscaling/v1`` Scale).

``kubectl scale`` and the HorizontalPodAutoscaler change replicas this way, and RBAC
can grant it alone (``deployments/scale``) without write access to the whole object.
As kube-apiserver serves it (``pkg/registry/apps/deployment/storage``): GET answers

    {"apiVersion": "autoscaling/v1", "kind": "Scale",
     "metadata": {name, namespace, uid, resourceVersion, creationTimestamp},
     "spec": {"replicas": N}, "status": {"replicas": N, "selector": "k=v,..."}}

and PUT or PATCH (merge, JSON or strategic, all applied to the Scale) change only
``spec.replicas``; a negative count is 422 ``Scale.autoscaling "NAME" is invalid:
spec.replicas: Invalid value: -1: must be greater than or equal to 0``. A missing
object is the parent's 404 (``deployments.apps "NAME" not found``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandbox.kubeapi import field_errors as fe
from sandbox.kubeapi.errors import JsonObject
from sandbox.kubeapi.patch import apply_patch_body, decode_patch_body, patch_type_for
from sandbox.kubeapi.store import ObjectStore
from sandbox.kubeapi.validation import IS_NEGATIVE

__all__ = ["SCALED", "read_scale", "write_scale"]

# (group, resource) served with a scale subresource here.
SCALED = frozenset({("apps", "deployments"), ("apps", "replicasets")})


def _selector(obj: Mapping[str, Any]) -> str:
    """The label selector as text (``status.selector``), match labels then expressions."""
    selector = (obj.get("spec") or {}).get("selector") or {}
    terms = [f"{key}={value}" for key, value in sorted((selector.get("matchLabels")
                                                         or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        values = ",".join(expression.get("values") or [])
        operator = str(expression.get("operator"))
        key = str(expression.get("key"))
        terms.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})",
                      "Exists": key, "DoesNotExist": f"!{key}"}.get(operator, key))
    return ",".join(terms)


def scale_of(obj: Mapping[str, Any]) -> JsonObject:
    meta = obj.get("metadata") or {}
    return {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {key: meta[key] for key in ("name", "namespace", "uid", "resourceVersion",
                                                "creationTimestamp") if key in meta},
        "spec": {"replicas": int((obj.get("spec") or {}).get("replicas", 1))},
        "status": {"replicas": int((obj.get("status") or {}).get("replicas") or 0),
                   "selector": _selector(obj)},
    }


def read_scale(store: ObjectStore, group: str, resource: str, name: str,
               namespace: str) -> JsonObject:
    return scale_of(store.get(group, resource, name, namespace))


def write_scale(store: ObjectStore, group: str, resource: str, name: str, namespace: str,
                method: str, content_type: str | None, raw: bytes) -> JsonObject:
    """PUT (a whole Scale) or PATCH (a patch of the Scale): the parent's replicas."""
    current = scale_of(store.get(group, resource, name, namespace))
    if method == "PUT":
        wanted = decode_patch_body(patch_type_for("application/merge-patch+json"), raw)
    else:
        patch_type = patch_type_for(content_type)
        wanted = apply_patch_body(patch_type, current, decode_patch_body(patch_type, raw))
    replicas = ((wanted or {}).get("spec") or {}).get("replicas") \
        if isinstance(wanted, dict) else None
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise fe.invalid_error("autoscaling", "Scale", name, [
            fe.invalid("spec.replicas", replicas, IS_NEGATIVE)])
    patched = store.patch(group, resource, name, {"spec": {"replicas": replicas}},
                          namespace=namespace)
    return scale_of(patched)
