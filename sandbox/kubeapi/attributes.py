"""Request attributes (verb, group, resource, namespace, name...) as kube-apiserver derives them.

Authorization, the access log and SubjectAccessReview all speak in these
attributes, so they are computed once per request, from the URL and method only,
by the rules of ``k8s.io/apiserver``'s ``RequestInfoFactory``:

* ``/api/v1/...`` and ``/apis/GROUP/VERSION/...`` with at least a resource are
  resource requests; everything else (``/api``, ``/apis/GROUP``, ``/version``,
  ``/openapi/v3``, ``/healthz``) is a non-resource request whose verb is the
  lower-case HTTP method;
* POST create, GET get (list without a name, watch with ``watch=true``), PUT
  update, PATCH patch, DELETE delete (deletecollection without a name);
* a list whose field selector pins ``metadata.name`` carries that name;
* ``/namespaces/NS`` itself has namespace NS (a namespace is in itself).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import unquote

from sandbox.kubeapi.selectors import EQUALS, SelectorError, parse_field_selector

_VERBS_BY_METHOD = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True)
class RequestAttributes:
    """What is being asked, independent of who asks."""

    verb: str
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    is_resource_request: bool = False

    def as_log_fields(self) -> dict[str, Any]:
        """The attributes under the names the real audit log uses."""
        fields = asdict(self)
        return {
            "verb": fields["verb"],
            "apiGroup": fields["api_group"],
            "apiVersion": fields["api_version"],
            "resource": fields["resource"],
            "subresource": fields["subresource"],
            "namespace": fields["namespace"],
            "name": fields["name"],
            "path": fields["path"],
            "resourceRequest": fields["is_resource_request"],
        }


def _last(query: Mapping[str, list[str]], name: str) -> str:
    values = query.get(name)
    return values[-1] if values else ""


def attributes_for(
    method: str, path: str, query: Mapping[str, list[str]] | None = None
) -> RequestAttributes:
    """The attributes of one HTTP request (see the module docstring for the rules)."""
    query = query or {}
    non_resource = RequestAttributes(verb=method.lower(), path=path)
    parts = [unquote(p) for p in path.strip("/").split("/") if p]
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return non_resource
    group = ""
    rest = parts[1:]
    if parts[0] == "apis":
        if len(rest) < 3:
            return non_resource
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    verb = _VERBS_BY_METHOD.get(method.upper(), "")
    if rest[0] == "watch" and len(rest) >= 2:
        verb, rest = "watch", rest[1:]  # the deprecated /watch/ path prefix
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) >= 2 else ""
    subresource = rest[2] if len(rest) >= 3 else ""
    if not name and verb == "get":
        verb = "watch" if _last(query, "watch").lower() in ("true", "1") else "list"
        name = _name_from_field_selector(_last(query, "fieldSelector"))
    if not name and verb == "delete":
        verb = "deletecollection"
    return RequestAttributes(
        verb=verb,
        api_group=group,
        api_version=version,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
        path=path,
        is_resource_request=True,
    )


def _name_from_field_selector(selector: str) -> str:
    if not selector:
        return ""
    try:
        parsed = parse_field_selector(selector)
    except SelectorError:
        return ""
    exact = [t for t in parsed.terms if t.field == "metadata.name" and t.operator == EQUALS]
    return exact[0].value if len(exact) == 1 and "/" not in exact[0].value else ""
