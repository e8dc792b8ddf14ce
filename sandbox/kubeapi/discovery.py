"""Discovery documents: ``/version``, ``/api``, ``/apis``, per-group-version resource lists.

kubectl resolves every kind and short name through discovery before it sends a
request, and it asks first for the aggregated form (``apidiscovery.k8s.io/v2``,
one document for all groups) before falling back to one request per group
version. Both forms are built here from the same :class:`ApiResource` rows, so
they cannot disagree: built-in types — tabled (:mod:`sandbox.kubeapi.resources`)
with their real scope, kind and verbs, plus any built-in type something has been
stored under — and the custom types of the stored CRDs, at the versions they serve
(:mod:`sandbox.kubeapi.registry`). A custom type without its CRD is not listed, so
kubectl finds "no matches for kind" for it, as on a real cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sandbox.kubeapi import resources
from sandbox.kubeapi.errors import ApiError, JsonObject
from sandbox.kubeapi.registry import version_priority
from sandbox.kubeapi.store import ObjectStore

AGGREGATED_MEDIA_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
_STATUS_VERBS = ("get", "patch", "update")
# Subresources served besides status (sandbox/kubeapi/scale.py, serviceproxy.py), as
# kube-apiserver lists them: (group, resource) -> (name, (group, version, kind), verbs).
_EXTRA_SUBRESOURCES: dict[tuple[str, str], tuple[tuple[str, tuple[str, str, str],
                                                      tuple[str, ...]], ...]] = {
    ("apps", "deployments"): (("scale", ("autoscaling", "v1", "Scale"),
                               ("get", "patch", "update")),),
    ("apps", "replicasets"): (("scale", ("autoscaling", "v1", "Scale"),
                               ("get", "patch", "update")),),
    ("", "services"): (("proxy", ("", "v1", "ServiceProxyOptions"),
                        ("create", "delete", "get", "patch", "update")),),
}


def wants_aggregated(accept: str | None) -> bool:
    """Whether the Accept header asks for aggregated discovery v2 (kubectl 1.30+ does)."""
    return any(
        "g=apidiscovery.k8s.io" in part and "v=v2" in part.replace("v=v2beta1", "")
        for part in (accept or "").split(",")
    )


@dataclass(frozen=True)
class ApiResource:
    """One row of discovery: a resource of one group version."""

    name: str
    singular: str
    namespaced: bool
    kind: str
    verbs: tuple[str, ...]
    short_names: tuple[str, ...]
    has_status: bool


class Discovery:
    """Builds the discovery documents from the resource table and the store."""

    def __init__(
        self, store: ObjectStore, *, git_version: str, server_address: Callable[[], str]
    ) -> None:
        self.store = store
        self.git_version = git_version
        self._server_address = server_address

    def version(self) -> JsonObject:
        major, minor = self.git_version.lstrip("v").split(".")[:2]
        return {
            "major": major,
            "minor": minor,
            "gitVersion": self.git_version,
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.22.0",
            "compiler": "gc",
            "platform": "linux/amd64",
        }

    # ------------------------------------------------------------------ rows

    def group_versions(self) -> dict[str, set[str]]:
        """Every non-core group with the versions it is served at."""
        versions: dict[str, set[str]] = {
            group: {resources.preferred_version(group)} for group in resources.known_groups()
        }
        for group, resource in self.store.resource_types():
            if not group or not resources.is_builtin(group):
                continue
            found = versions.setdefault(group, set())
            for obj in self.store.list(group, resource):
                api_version = str(obj.get("apiVersion", ""))
                if api_version.startswith(group + "/"):
                    found.add(api_version.split("/", 1)[1])
            if not found:
                found.add(resources.preferred_version(group))
        for group, served in self.store.types.group_versions().items():
            versions[group] = set(served)
        return versions

    def resources_of(self, group: str, version: str | None = None) -> list[ApiResource]:
        """The rows of one group at one version (built-in groups: the same at every
        version the sandbox serves them at; custom groups: the CRDs serving it)."""
        if not resources.is_builtin(group):
            return [
                ApiResource(
                    name=custom.plural,
                    singular=custom.info.singular,
                    namespaced=custom.info.namespaced,
                    kind=custom.info.kind,
                    verbs=custom.info.verbs,
                    short_names=custom.info.short_names,
                    has_status=version is None or version in custom.status_versions,
                )
                for custom in self.store.types.of_group(group, version)
            ]
        names = set(resources.known_resources(group)) | {
            res for grp, res in self.store.resource_types() if grp == group
        }
        rows: list[ApiResource] = []
        for name in sorted(names):
            info = resources.known(group, name)
            rows.append(
                ApiResource(
                    name=name,
                    singular=(info.singular if info else "") or resources.singularize(name),
                    namespaced=info.namespaced if info else True,
                    kind=self.store.kind_of(group, name),
                    verbs=info.verbs if info else resources.STORED_VERBS,
                    short_names=info.short_names if info else (),
                    has_status=info.stored if info else True,
                )
            )
        return rows

    def preferred(self, group: str, versions: set[str]) -> str:
        if not resources.is_builtin(group):
            return sorted(versions, key=version_priority)[0]
        preferred = resources.preferred_version(group)
        return preferred if preferred in versions else sorted(versions)[0]

    # ------------------------------------------------------------------ legacy documents

    def api_versions(self) -> JsonObject:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": self._server_address()}
            ],
        }

    def _group_entry(self, group: str, versions: set[str]) -> JsonObject:
        preferred = self.preferred(group, versions)
        return {
            "name": group,
            "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in sorted(versions)],
            "preferredVersion": {"groupVersion": f"{group}/{preferred}", "version": preferred},
        }

    def group_list(self) -> JsonObject:
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                self._group_entry(group, versions)
                for group, versions in sorted(self.group_versions().items())
            ],
        }

    def group(self, group: str) -> JsonObject:
        versions = self.group_versions().get(group)
        if not versions:
            raise ApiError.path_not_found()
        return {"kind": "APIGroup", "apiVersion": "v1", **self._group_entry(group, versions)}

    def resource_list(self, group: str, version: str) -> JsonObject:
        entries: list[JsonObject] = []
        for row in self.resources_of(group, version):
            entry: JsonObject = {
                "name": row.name,
                "singularName": row.singular,
                "namespaced": row.namespaced,
                "kind": row.kind,
                "verbs": list(row.verbs),
            }
            if row.short_names:
                entry["shortNames"] = list(row.short_names)
            entries.append(entry)
            if row.has_status:
                entries.append(
                    {
                        "name": f"{row.name}/status",
                        "singularName": "",
                        "namespaced": row.namespaced,
                        "kind": row.kind,
                        "verbs": list(_STATUS_VERBS),
                    }
                )
            for name, (sub_group, sub_version, kind), verbs in _EXTRA_SUBRESOURCES.get(
                    (group, row.name), ()):
                entries.append({"name": f"{row.name}/{name}", "singularName": "",
                                "namespaced": row.namespaced, "kind": kind,
                                "verbs": list(verbs),
                                **({"group": sub_group, "version": sub_version}
                                   if sub_group else {})})
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": entries,
        }

    # ------------------------------------------------------------------ aggregated (v2)

    def aggregated(self, *, core: bool) -> JsonObject:
        """The ``APIGroupDiscoveryList`` for ``/api`` (core) or ``/apis`` (all other groups)."""
        if core:
            items = [self._discovery_group("", {"v1"})]
        else:
            items = [
                self._discovery_group(group, versions)
                for group, versions in sorted(self.group_versions().items())
            ]
        return {
            "kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {},
            "items": items,
        }

    def _discovery_group(self, group: str, versions: set[str]) -> JsonObject:
        preferred = self.preferred(group, versions) if group else "v1"
        ordered = [preferred, *sorted(versions - {preferred}, key=version_priority)]
        return {
            "metadata": {"name": group},
            "versions": [
                {
                    "version": version,
                    "resources": [self._discovery_resource(group, version, row)
                                  for row in self.resources_of(group, version)],
                    "freshness": "Current",
                }
                for version in ordered
            ],
        }

    @staticmethod
    def _discovery_resource(group: str, version: str, row: ApiResource) -> JsonObject:
        kind = {"group": group, "version": version, "kind": row.kind}
        entry: JsonObject = {
            "resource": row.name,
            "responseKind": kind,
            "scope": "Namespaced" if row.namespaced else "Cluster",
            "singularResource": row.singular,
            "verbs": list(row.verbs),
        }
        if row.short_names:
            entry["shortNames"] = list(row.short_names)
        subresources: list[JsonObject] = []
        if row.has_status:
            subresources.append(
                {"subresource": "status", "responseKind": kind, "verbs": list(_STATUS_VERBS)})
        for name, (sub_group, sub_version, sub_kind), verbs in _EXTRA_SUBRESOURCES.get(
                (group, row.name), ()):
            subresources.append({"subresource": name, "responseKind": {
                "group": sub_group, "version": sub_version, "kind": sub_kind},
                "verbs": list(verbs)})
        if subresources:
            entry["subresources"] = subresources
        return entry
