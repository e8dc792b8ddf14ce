"""Which HTTPRoute rule takes a request, and which backend of it (pure).

Written from the Gateway API v1.2.1 standard-channel HTTPRoute (the CRD's own field
documentation, which is the specification):

* **Matching.** A rule matches when any of its ``matches`` does (all conditions of one
  match ANDed). ``PathPrefix`` matches on whole path elements, ignoring a trailing
  ``/`` of the prefix (``/abc`` takes ``/abc``, ``/abc/`` and ``/abc/d``, never
  ``/abcd``); ``Exact`` the whole path. The query string is not part of the path.
  Headers (names case-insensitive) and query parameters match ``Exact``; a
  ``RegularExpression`` match (implementation-specific, which GKE does not offer on
  these classes) never matches here. A route's ``hostnames`` must take the request's
  Host (``*.example.com`` takes one or more labels before ``example.com``).
* **Precedence** across every rule of every route attached: an Exact path, then the
  longest prefix, then a method match, then most header matches, then most query
  matches; on a tie the oldest route, then ``namespace/name`` alphabetically, then the
  first rule. No rule matching is a 404.
* **Weights.** A backend is chosen per request with probability weight / sum of
  weights (a missing weight is 1, weight 0 gets nothing). A request whose draw falls on
  an invalid backend (a Service that does not exist, another kind, another namespace
  without a ReferenceGrant) is answered 500, so invalid backends get exactly their
  share of 500s; all weights 0, or no backendRefs, leave nothing to forward to: 500.
  A Service without ready endpoints answers 503 (the Service's own proxy), which the
  specification prefers for that case.

Filters (header modifiers, redirects, rewrites, mirrors) and timeouts are not
simulated: accelops' routes use none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["BackendRef", "Choice", "Request", "choose_backend", "path_matches",
           "select_rule"]

Obj = dict[str, Any]


@dataclass(frozen=True)
class Request:
    """What matching looks at: method, path without the query, headers, query."""

    method: str
    path: str
    headers: Mapping[str, str]  # lower-cased names
    query: Mapping[str, Sequence[str]]
    host: str = ""


@dataclass(frozen=True)
class BackendRef:
    """One backendRef as routing sees it: where it resolved to, or why it did not."""

    name: str
    weight: int
    port: int | None  # the Service proxy's host port; None when invalid
    invalid: str = ""  # why it is invalid (its status reason); "" when valid
    namespace: str = ""  # where the Service was looked for, and the port asked (status)
    port_asked: Any = None


@dataclass(frozen=True)
class Choice:
    """The rule a request takes: the route's key and the rule's index."""

    route: str  # "namespace/name"
    rule: int


def path_matches(match_type: str, value: str, path: str) -> bool:
    if match_type == "Exact":
        return path == value
    if match_type == "PathPrefix":
        prefix = value.rstrip("/")
        return not prefix or path == prefix or path.startswith(prefix + "/")
    return False  # RegularExpression: not offered


def _host_matches(hostnames: Iterable[str], host: str) -> bool:
    names = list(hostnames)
    if not names:
        return True
    host = host.split(":", 1)[0].lower()
    for name in names:
        if name.startswith("*."):
            if host.endswith(name[1:]) and len(host) > len(name) - 1:
                return True
        elif host == name.lower():
            return True
    return False


def _score(match: Mapping[str, Any], request: Request) -> tuple[int, int, int, int, int] | None:
    """The precedence of a match that takes the request (higher first), None if not."""
    path = match.get("path") or {"type": "PathPrefix", "value": "/"}
    kind, value = str(path.get("type") or "PathPrefix"), str(path.get("value") or "/")
    if not path_matches(kind, value, request.path):
        return None
    method = match.get("method")
    if method and method != request.method:
        return None
    headers = match.get("headers") or []
    for header in headers:
        if (header.get("type") or "Exact") != "Exact" or \
                request.headers.get(str(header["name"]).lower()) != header.get("value"):
            return None
    queries = match.get("queryParams") or []
    for query in queries:
        if (query.get("type") or "Exact") != "Exact" or \
                query.get("value") not in request.query.get(str(query["name"]), []):
            return None
    exact = 1 if kind == "Exact" else 0
    return (exact, len(value) if not exact else 0, 1 if method else 0, len(headers),
            len(queries))


def select_rule(routes: Iterable[Mapping[str, Any]], request: Request) -> Choice | None:
    """The rule of ``routes`` (attached, accepted) that takes the request, by the
    specification's precedence; None when none does (the Gateway answers 404)."""
    best: tuple[tuple[int, ...], tuple[str, str, int], Choice] | None = None
    for route in routes:
        meta = route.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        spec = route.get("spec") or {}
        if not _host_matches(spec.get("hostnames") or [], request.host):
            continue
        for index, rule in enumerate(spec.get("rules") or []):
            matches = rule.get("matches") or [{}]
            scores = [s for m in matches if (s := _score(m, request)) is not None]
            if not scores:
                continue
            score = max(scores)
            # Higher score first; then older, then alphabetical, then earlier rule.
            order = (str(meta.get("creationTimestamp") or ""), key, index)
            if best is None or score > best[0] or (score == best[0] and order < best[1]):
                best = (score, order, Choice(key, index))
    return best[2] if best else None


def choose_backend(refs: Sequence[BackendRef],
                   draw: Callable[[int], int]) -> tuple[int, BackendRef | None]:
    """``(status, backend)`` for one request: ``(0, ref)`` to forward to a valid
    backend, ``(500, ref)`` when the draw fell on an invalid one, ``(500, None)`` when
    there is nothing to draw from. ``draw(n)`` returns a uniform integer in [0, n)."""
    total = sum(ref.weight for ref in refs)
    if total <= 0:
        return 500, None
    point = draw(total)
    for ref in refs:
        if point < ref.weight:
            return (500, ref) if ref.invalid else (0, ref)
        point -= ref.weight
    raise AssertionError("draw outside [0, total)")
