"""Saved pools: one ConfigMap per removed pool, in the cluster's state namespace.

Kept in the cluster the pool belongs to, next to reconcile_slices' record, so one
list call per cluster reads them all and they go away with the cluster. A removal
writes the ConfigMap before its operation starts (a deleted slice can always be
recreated); a racing tick that finds it already written keeps the first one, which
holds the pool as it was before anything was changed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, fields

from shared import configmaps
from shared.errors import AlreadyExistsError
from shared.kube import CONFIG_MAPS, KubeClient
from shared.offhours.model import SavedPool

__all__ = ["LABEL_SAVED", "SAVED_SELECTOR", "config_map_name", "forget", "load_saved",
           "save_new", "update"]

LABEL_SAVED = "accelops.dev/pool-schedule"
SAVED_SELECTOR = f"{LABEL_SAVED}=saved"
_KEY = "saved.json"
_FIELDS = {f.name for f in fields(SavedPool)}


def config_map_name(pool: str) -> str:
    # Pool names are at most 40 characters of [a-z0-9-]: a valid ConfigMap name.
    return f"accelops-pool-{pool}"


def _data(saved: SavedPool) -> dict[str, str]:
    return {_KEY: json.dumps(asdict(saved), sort_keys=True)}


def _parse(data: Mapping[str, str]) -> SavedPool | None:
    try:
        raw = json.loads(data.get(_KEY, ""))
        return SavedPool(**{k: v for k, v in raw.items() if k in _FIELDS})
    except (ValueError, TypeError):
        return None


def load_saved(kube: KubeClient, namespace: str) -> dict[str, SavedPool]:
    """Every saved pool of the cluster by pool name (one list call). An unreadable
    ConfigMap is left out (and stays for a person to look at)."""
    found: dict[str, SavedPool] = {}
    for stored in configmaps.select(kube, namespace, SAVED_SELECTOR):
        saved = _parse(stored.data)
        if saved is not None:
            found[saved.pool] = saved
    return found


def save_new(kube: KubeClient, namespace: str, saved: SavedPool) -> SavedPool:
    """Write the saved state unless one exists; returns the one that is stored."""
    name = config_map_name(saved.pool)
    try:
        configmaps.write(kube, name, namespace, _data(saved), version=None,
                         labels={LABEL_SAVED: "saved"})
        return saved
    except AlreadyExistsError:
        existing = _parse(configmaps.get(kube, name, namespace).data)
        return existing if existing is not None else saved


def update(kube: KubeClient, namespace: str, saved: SavedPool) -> None:
    kube.merge_patch(CONFIG_MAPS, config_map_name(saved.pool), namespace,
                     {"data": _data(saved)})


def forget(kube: KubeClient, namespace: str, pool: str) -> None:
    kube.delete(CONFIG_MAPS, config_map_name(pool), namespace)
