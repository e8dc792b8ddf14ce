"""ConfigMaps as small records, written only over the version that was read.

Several features keep what short-lived runs must remember in a ConfigMap: the
serving ledger (one per model), reconcile_slices' record, the teams' usage, the
pools removed off-hours. Runs overlap (a redelivery, a tick beside a trigger), and
Kubernetes has no transactions, so a write is a compare-and-swap on the
ConfigMap's ``resourceVersion``:

- :func:`find` (or :func:`get`) reads one with its version; :func:`select` reads
  every one a label selector picks;
- :func:`write` creates it when it was not there when read (``version=None``) and
  otherwise replaces it only if it is still at the version read. A concurrent
  writer makes it raise :class:`~shared.errors.ConflictError` — as
  :class:`~shared.errors.AlreadyExistsError` when both created it — and leaves the
  other's data in place.

What a conflict means is the caller's to say: the serving ledger retries the event
on the new state, reconcile_slices stops without acting, a usage refresh keeps the
other run's snapshot, a saved pool keeps the first one written. Nothing here
retries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.kube import CONFIG_MAPS, KubeClient

__all__ = ["StoredConfigMap", "find", "get", "select", "write"]


@dataclass(frozen=True, slots=True)
class StoredConfigMap:
    """A ConfigMap as read or written: its data, labels and the version to write over."""

    name: str
    namespace: str
    data: dict[str, str]
    labels: dict[str, str]
    version: str | None  # metadata.resourceVersion

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> StoredConfigMap:
        """From a ConfigMap as the API returns it (a get, a list item, a write)."""
        meta = obj.get("metadata") or {}
        return cls(name=str(meta.get("name", "")), namespace=str(meta.get("namespace", "")),
                   data=dict(obj.get("data") or {}), labels=dict(meta.get("labels") or {}),
                   version=meta.get("resourceVersion"))


def get(kube: KubeClient, name: str, namespace: str) -> StoredConfigMap:
    """The ConfigMap; NotFoundError when there is none."""
    return StoredConfigMap.from_object(kube.get(CONFIG_MAPS, name, namespace))


def find(kube: KubeClient, name: str, namespace: str) -> StoredConfigMap | None:
    """The ConfigMap, or None when there is none."""
    obj = kube.find(CONFIG_MAPS, name, namespace)
    return StoredConfigMap.from_object(obj) if obj is not None else None


def select(kube: KubeClient, namespace: str, label_selector: str) -> list[StoredConfigMap]:
    """Every ConfigMap of the namespace that ``label_selector`` picks (one list call)."""
    return [StoredConfigMap.from_object(obj)
            for obj in kube.list(CONFIG_MAPS, namespace, label_selector=label_selector)]


def write(kube: KubeClient, name: str, namespace: str, data: Mapping[str, str], *,
          version: str | None, labels: Mapping[str, str],
          annotations: Mapping[str, str] | None = None) -> StoredConfigMap:
    """Create the ConfigMap (``version`` None: there was none when it was read) or
    replace it if it is still at ``version``; returns it as stored, with its new
    version. ``data``, ``labels`` and ``annotations`` replace what it held.

    Raises AlreadyExistsError when someone created it first, ConflictError when
    someone changed it since ``version``, NotFoundError when it was deleted since,
    MissingTargetError when the namespace does not exist; and the API's other
    errors as :class:`KubeClient` translates them.
    """
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels)}
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                            "data": dict(data)}
    if version is None:
        saved = kube.create(CONFIG_MAPS, body)
    else:
        meta["resourceVersion"] = version
        saved = kube.replace(CONFIG_MAPS, body)
    return StoredConfigMap.from_object(saved)
