"""Which resource types the API serves: built-in kinds, and custom ones once a CRD exists.

kube-apiserver serves its built-in groups from compiled-in types and every other
group through the apiextensions-apiserver, which routes ``/apis/GROUP/VERSION/PLURAL``
only while a CustomResourceDefinition ``PLURAL.GROUP`` exists and serves VERSION
(``spec.versions[].served``); any other path of such a group falls through to the
not-found handler (``k8s.io/apiserver`` ``pkg/util/notfoundhandler``:
``http.NotFound``, a plain-text ``404 page not found``). Discovery lists the same
types, so ``kubectl`` says ``no matches for kind "ClusterQueue" in version
"kueue.x-k8s.io/v1beta1"`` (and "ensure CRDs are installed first") before a CRD
is applied, as on a cluster without the controllers.

:class:`TypeRegistry` is that rule for the sandbox: built-in groups from the table
in :mod:`sandbox.kubeapi.resources` (served at any version, as before), custom
groups from the CRDs in the store. Kind, scope, singular, short names and the status
subresource come from ``spec.names``, ``spec.scope`` and ``spec.versions``; the
preferred version of a group is the highest by Kubernetes' version priority (GA,
then beta, then alpha; ``apimachinery`` ``CompareKubeAwareVersionStrings``).
A CRD counts as established as soon as it is stored (the real apiextensions
controllers take a moment to set ``Established``; :func:`accepted_status` fills in
the status they would write). Not simulated: name conflicts between CRDs
(``NamesAccepted=False``), conversion between versions, ``categories``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.kubeapi import field_errors as fe
from sandbox.kubeapi import resources
from sandbox.kubeapi.errors import JsonObject
from sandbox.kubeapi.resources import STORED_VERBS, ResourceInfo

__all__ = [
    "CRD_GROUP",
    "CRD_RESOURCE",
    "CustomType",
    "TypeRegistry",
    "accepted_status",
    "check_definition",
    "version_priority",
]

CRD_GROUP = "apiextensions.k8s.io"
CRD_RESOURCE = "customresourcedefinitions"
CRD_KIND = "CustomResourceDefinition"

# (serial, CRD objects): the store's CRDs and a number that changes whenever they do.
CrdSnapshot = Callable[[], tuple[int, Sequence[Mapping[str, Any]]]]

_KUBE_VERSION = re.compile(r"^v([1-9][0-9]*)(?:(alpha|beta)([1-9][0-9]*))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key, smallest first, that puts versions in kube-aware priority order:
    ``v2 < v1 < v2beta1 < v1beta2 < v1beta1 < v1alpha1 < foo`` (as apimachinery
    orders them)."""
    match = _KUBE_VERSION.match(version)
    if match is None:
        return (3, 0, 0, version)
    major = int(match[1])
    stage = {None: 0, "beta": 1, "alpha": 2}[match[2]]
    minor = int(match[3] or 0)
    return (stage, -major, -minor, "")


@dataclass(frozen=True)
class CustomType:
    """What one CRD makes the API serve."""

    group: str
    plural: str
    info: ResourceInfo
    versions: tuple[str, ...]  # served, in priority order
    storage: str
    status_versions: frozenset[str]  # served versions with the status subresource

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.group}"


def _custom_type(crd: Mapping[str, Any]) -> CustomType | None:
    spec = crd.get("spec")
    if not isinstance(spec, Mapping):
        return None
    names = spec.get("names") if isinstance(spec.get("names"), Mapping) else {}
    assert isinstance(names, Mapping)
    group, plural, kind = spec.get("group"), names.get("plural"), names.get("kind")
    if not (isinstance(group, str) and isinstance(plural, str) and isinstance(kind, str)):
        return None
    served: list[str] = []
    status: set[str] = set()
    storage = ""
    for version in spec.get("versions") or []:
        if not isinstance(version, Mapping) or not isinstance(version.get("name"), str):
            continue
        if version.get("storage"):
            storage = version["name"]
        if version.get("served"):
            served.append(version["name"])
            subresources = version.get("subresources")
            if isinstance(subresources, Mapping) and "status" in subresources:
                status.add(version["name"])
    served.sort(key=version_priority)
    short_names = tuple(str(s) for s in names.get("shortNames") or [])
    info = ResourceInfo(
        kind=kind,
        namespaced=spec.get("scope") == "Namespaced",
        singular=str(names.get("singular") or kind.lower()),
        short_names=short_names,
        verbs=STORED_VERBS,
    )
    return CustomType(group, plural, info, tuple(served), storage, frozenset(status))


class TypeRegistry:
    """The types the API serves; custom ones are re-read only when the CRDs change."""

    def __init__(self, crds: CrdSnapshot) -> None:
        self._crds = crds
        self._lock = threading.Lock()
        self._serial = -1
        self._custom: dict[tuple[str, str], CustomType] = {}

    def _table(self) -> dict[tuple[str, str], CustomType]:
        serial, crds = self._crds()
        with self._lock:
            if serial != self._serial:
                table: dict[tuple[str, str], CustomType] = {}
                for crd in crds:
                    parsed = _custom_type(crd)
                    if parsed is not None and parsed.versions:
                        table[(parsed.group, parsed.plural)] = parsed
                self._custom, self._serial = table, serial
            return self._custom

    # ------------------------------------------------------------------ lookups

    def custom(self, group: str, resource: str) -> CustomType | None:
        """The CRD-defined type ``(group, plural)``, if a CRD defines it."""
        if resources.is_builtin(group):
            return None
        return self._table().get((group, resource))

    def custom_types(self) -> list[CustomType]:
        """Every type a CRD defines, by group and plural."""
        return [self._table()[key] for key in sorted(self._table())]

    def info(self, group: str, resource: str) -> ResourceInfo | None:
        """Kind, scope and names of a served type (built-in table or CRD), else None."""
        if resources.is_builtin(group):
            return resources.known(group, resource)
        found = self.custom(group, resource)
        return found.info if found is not None else None

    def serves(self, group: str, version: str, resource: str) -> bool:
        """Whether ``/apis/GROUP/VERSION/RESOURCE`` exists (built-in groups: always)."""
        if resources.is_builtin(group):
            return True
        found = self.custom(group, resource)
        return found is not None and version in found.versions

    def group_versions(self) -> dict[str, list[str]]:
        """Every custom group with the versions its CRDs serve, in priority order."""
        found: dict[str, set[str]] = {}
        for custom in self._table().values():
            found.setdefault(custom.group, set()).update(custom.versions)
        return {group: sorted(versions, key=version_priority)
                for group, versions in sorted(found.items())}

    def of_group(self, group: str, version: str | None = None) -> list[CustomType]:
        """The custom types of one group (those served at ``version``, when given)."""
        return [custom for custom in self.custom_types() if custom.group == group
                and (version is None or version in custom.versions)]


# ---------------------------------------------------------------------- the CRD kind itself

def check_definition(crd: JsonObject) -> None:
    """apiextensions' rule for a CRD's name: 422 unless it is
    ``<spec.names.plural>.<spec.group>`` (``ValidateCustomResourceDefinition``)."""
    name = str((crd.get("metadata") or {}).get("name") or "")
    spec = crd.get("spec") if isinstance(crd.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
    assert isinstance(names, dict)
    if name == f"{names.get('plural') or ''}.{spec.get('group') or ''}":
        return
    raise fe.invalid_error(CRD_GROUP, CRD_KIND, name, [
        fe.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group')])


def accepted_status(crd: JsonObject, now: str) -> JsonObject:
    """The status the apiextensions controllers give an accepted CRD: its names accepted,
    ``NamesAccepted`` and ``Established`` True, the storage version recorded."""
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    stored = [str(v.get("name")) for v in spec.get("versions") or []
              if isinstance(v, dict) and v.get("storage")]
    previous = (crd.get("status") or {}).get("storedVersions") or []
    return {
        "acceptedNames": names,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
        "storedVersions": list(dict.fromkeys([*previous, *stored])),
    }
