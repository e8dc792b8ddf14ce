"""GKE's Gateway controller, in the sandbox: Gateways become loopback listeners that
route each request by its HTTPRoute's weights.

What GKE does and the sandbox does too:

* **GatewayClasses from the start.** GKE's single-cluster classes
  (:data:`GKE_CLASSES`, controller ``networking.gke.io/gateway``) exist in every
  cluster with the Gateway API enabled (here: whose API serves the Gateway CRD),
  ``Accepted``; users never create them. Without the CRDs the controller does nothing.
* **A Gateway of a GKE class** gets, per ``HTTP`` listener, a listening loopback port
  (where GKE programs a load balancer): annotation ``sandbox.accelops.dev/host-ports``
  ``{"<listener name>": PORT}``, so ``sandbox.cluster.objects.loopback_url(gateway,
  "<listener name>")`` is its URL, like a Service's. Its status says where it answers
  (``addresses: [{type: IPAddress, value: 127.0.0.1}]``), ``Accepted`` and
  ``Programmed``, and per listener the kinds it takes, the routes attached and its
  conditions. Other protocols are ``Accepted: False, UnsupportedProtocol``.
* **HTTPRoutes** whose parentRefs name such a Gateway get a ``status.parents`` entry of
  this controller (other controllers' entries are kept): ``Accepted`` (or
  ``NotAllowedByListeners`` when no listener's ``allowedRoutes`` takes the route's
  namespace: ``Same`` by default, ``All``, or a ``Selector``'s ``matchLabels``) and
  ``ResolvedRefs`` (``BackendNotFound`` for a Service that does not exist or lacks the
  port, ``InvalidKind`` for anything but a core Service, ``RefNotPermitted`` for another
  namespace without a ReferenceGrant).
* **Per request** the listener reads the routes and Services as stored *now*, so a
  weight patch applies to the next request: the rule is chosen and the backend drawn as
  :mod:`sandbox.cluster.httproutes` says, and the request goes to that Service's
  loopback proxy (:mod:`sandbox.cluster.services`), whose answer streams back through
  the same forwarder the Service proxy uses (server-sent events pass unbuffered).

Not modelled: the minutes GKE takes to program a load balancer, its health checks
(HealthCheckPolicy objects are validated, not acted on: a Service's own proxy
already skips pods that are not Ready), TLS listeners, filters, timeouts, and
multi-cluster classes.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

from sandbox.cluster.httproutes import BackendRef, Request, choose_backend, select_rule
from sandbox.cluster.objects import (
    ANNOTATION_HOST_PORTS,
    SERVICES,
    Obj,
    annotations_of,
    condition,
    labels_of,
    name_of,
    namespace_of,
    patch_quietly,
    replace_status,
    timestamp,
    uid_of,
)
from sandbox.cluster.proxy import ForwardingHandler
from sandbox.common.clock import SimClock
from sandbox.common.httpserver import ApiHttpServer
from sandbox.kubeapi import ApiError, ObjectStore

__all__ = ["GKE_CLASSES", "GKE_CONTROLLER", "GatewayController"]

GROUP = "gateway.networking.k8s.io"
GATEWAY_CLASSES = (GROUP, "gatewayclasses")
GATEWAYS = (GROUP, "gateways")
HTTPROUTES = (GROUP, "httproutes")
REFERENCE_GRANTS = (GROUP, "referencegrants")
NAMESPACES = ("", "namespaces")
GKE_CONTROLLER = "networking.gke.io/gateway"
GKE_CLASSES = ("gke-l7-global-external-managed", "gke-l7-regional-external-managed",
               "gke-l7-rilb", "gke-l7-gxlb")
_ROUTE_KIND = [{"group": GROUP, "kind": "HTTPRoute"}]


class _Router:
    """What one listener asks on every request, answered from the store as it is now."""

    def __init__(self, store: ObjectStore, gateway: Obj, listener: str,
                 rng: random.Random) -> None:
        self.store = store
        self.namespace, self.name, self.listener = namespace_of(gateway), name_of(gateway), \
            listener
        self.rng = rng
        self.lock = threading.Lock()

    def resolve(self, request: Request) -> tuple[int, int | None, str]:
        """``(0, port, "")`` to forward to a Service proxy, else ``(status, None, why)``."""
        gateway = self.store.try_get(*GATEWAYS, self.name, self.namespace)
        if gateway is None:
            return 404, None, f"gateway {self.namespace}/{self.name} is gone"
        routes = [r for r in self.store.list(*HTTPROUTES)
                  if _attached(self.store, gateway, r, self.listener)]
        choice = select_rule(routes, request)
        if choice is None:
            return 404, None, f"no route for {request.path}"
        route = next(r for r in routes
                     if f"{namespace_of(r)}/{name_of(r)}" == choice.route)
        rule = (route.get("spec") or {}).get("rules", [])[choice.rule]
        refs = [_resolve(self.store, route, ref) for ref in rule.get("backendRefs") or []]
        with self.lock:
            status, ref = choose_backend(refs, self.rng.randrange)
        if ref is None:
            return 500, None, f"route {choice.route} has no backend with a weight"
        if status:
            return status, None, f"backend {ref.name} of {choice.route} is invalid: {ref.invalid}"
        if ref.port is None:
            return 503, None, f"no healthy upstream for {ref.name}"
        return 0, ref.port, ""


class _Handler(ForwardingHandler):
    server: ApiHttpServer[_Router]

    def log_message(self, format: str, *args: object) -> None:
        return

    def _route(self) -> None:
        body = self.read_body()
        url = urlsplit(self.path)
        request = Request(self.command, url.path or "/",
                          {k.lower(): v for k, v in self.headers.items()},
                          parse_qs(url.query), self.headers.get("Host") or "")
        status, port, why = self.server.api.resolve(request)
        if port is None:
            self.answer(status, why)
        elif not self.forward_to([port], body):
            self.answer(503, "no healthy upstream")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _route


def _parent_is(ref: Mapping[str, Any], route: Obj, gateway: Obj) -> bool:
    return (ref.get("group", GROUP) == GROUP and ref.get("kind", "Gateway") == "Gateway"
            and ref.get("name") == name_of(gateway)
            and ref.get("namespace", namespace_of(route)) == namespace_of(gateway))


def _allows(store: ObjectStore, listener: Mapping[str, Any], gateway: Obj, route: Obj) -> bool:
    namespaces = ((listener.get("allowedRoutes") or {}).get("namespaces") or {})
    origin = namespaces.get("from", "Same")
    if origin == "All":
        return True
    if origin == "Same":
        return namespace_of(route) == namespace_of(gateway)
    wanted = (namespaces.get("selector") or {}).get("matchLabels") or {}
    found = store.try_get(*NAMESPACES, namespace_of(route))
    have = labels_of(found) if found else {}
    return all(have.get(k) == v for k, v in wanted.items())


def _listeners_for(store: ObjectStore, gateway: Obj, route: Obj) -> list[str]:
    """The HTTP listeners of ``gateway`` ``route`` attaches to (parentRef and allowedRoutes)."""
    names: list[str] = []
    for ref in (route.get("spec") or {}).get("parentRefs") or []:
        if not _parent_is(ref, route, gateway):
            continue
        for listener in (gateway.get("spec") or {}).get("listeners") or []:
            if listener.get("protocol") != "HTTP":
                continue
            if ref.get("sectionName") not in (None, listener.get("name")):
                continue
            if ref.get("port") not in (None, listener.get("port")):
                continue
            if _allows(store, listener, gateway, route):
                names.append(str(listener.get("name")))
    return names


def _attached(store: ObjectStore, gateway: Obj, route: Obj, listener: str) -> bool:
    return listener in _listeners_for(store, gateway, route)


def _granted(store: ObjectStore, route: Obj, namespace: str, name: str) -> bool:
    for grant in store.list(*REFERENCE_GRANTS, namespace):
        spec = grant.get("spec") or {}
        if any(f.get("group") == GROUP and f.get("kind") == "HTTPRoute"
               and f.get("namespace") == namespace_of(route) for f in spec.get("from") or []) \
                and any(t.get("group", "") == "" and t.get("kind") == "Service"
                        and t.get("name") in (None, name) for t in spec.get("to") or []):
            return True
    return False


def _resolve(store: ObjectStore, route: Obj, ref: Mapping[str, Any]) -> BackendRef:
    name, weight = str(ref.get("name")), int(ref.get("weight", 1))
    namespace = str(ref.get("namespace") or namespace_of(route))
    where: dict[str, Any] = {"namespace": namespace, "port_asked": ref.get("port")}
    if ref.get("group", "") != "" or ref.get("kind", "Service") != "Service":
        return BackendRef(name, weight, None, "InvalidKind", **where)
    if namespace != namespace_of(route) and not _granted(store, route, namespace, name):
        return BackendRef(name, weight, None, "RefNotPermitted", **where)
    service = store.try_get(*SERVICES, name, namespace)
    if service is None:
        return BackendRef(name, weight, None, "BackendNotFound", **where)
    port = next((p for p in (service.get("spec") or {}).get("ports") or []
                 if p.get("port") == ref.get("port")), None)
    if port is None:
        return BackendRef(name, weight, None, "BackendNotFound", **where)
    try:
        hosts = json.loads(annotations_of(service).get(ANNOTATION_HOST_PORTS) or "{}")
    except ValueError:
        hosts = {}
    host = hosts.get(str(port.get("name") or port.get("port")))
    return BackendRef(name, weight, int(host) if host is not None else None)


_MESSAGES = {
    "BackendNotFound": "backend Service {ns}/{name} (port {port}) not found",
    "InvalidKind": "backendRef {name} is not a core Service",
    "RefNotPermitted": "backendRef to {ns}/{name} is not permitted by a ReferenceGrant",
}


class GatewayController:
    """GatewayClasses, Gateway listeners and HTTPRoute status; see the module docstring."""

    def __init__(self, store: ObjectStore, clock: SimClock, *,
                 rng: random.Random | None = None) -> None:
        self.store = store
        self.clock = clock
        self.rng = rng or random.Random()  # noqa: S311 - traffic split, not security
        self._servers: dict[tuple[str, str], ApiHttpServer[_Router]] = {}

    def reconcile(self) -> None:
        if not self.store.types.serves(GROUP, "v1", "gateways"):
            return  # the Gateway API is not enabled on this cluster: GKE runs nothing
        self._classes()
        gateways = [g for g in self.store.list(*GATEWAYS)
                    if (g.get("spec") or {}).get("gatewayClassName") in GKE_CLASSES]
        routes = self.store.list(*HTTPROUTES)
        kept: set[tuple[str, str]] = set()
        for gateway in gateways:
            kept.update(self._gateway(gateway, routes))
        for key in [k for k in self._servers if k not in kept]:
            self._servers.pop(key).close()
        for route in routes:
            self._route_status(route, gateways)

    def close(self) -> None:
        for server in self._servers.values():
            server.close()
        self._servers.clear()

    def _classes(self) -> None:
        for name in GKE_CLASSES:
            current = self.store.try_get(*GATEWAY_CLASSES, name)
            if current is None:
                try:
                    current = self.store.create(*GATEWAY_CLASSES, {
                        "apiVersion": f"{GROUP}/v1", "kind": "GatewayClass",
                        "metadata": {"name": name},
                        "spec": {"controllerName": GKE_CONTROLLER}})
                except ApiError as exc:
                    if exc.code != 409:
                        raise
                    continue
            if (current.get("spec") or {}).get("controllerName") != GKE_CONTROLLER:
                continue
            status = dict(current.get("status") or {})
            status["conditions"] = condition(
                status.get("conditions"), "Accepted", True, "Accepted", "", timestamp(self.clock),
                extra={"observedGeneration": current["metadata"].get("generation", 1)})
            replace_status(self.store, GATEWAY_CLASSES, current, status)

    def _gateway(self, gateway: Obj, routes: list[Obj]) -> set[tuple[str, str]]:
        now, generation = timestamp(self.clock), gateway["metadata"].get("generation", 1)
        extra = {"observedGeneration": generation}
        old = {str(entry.get("name")): entry
               for entry in (gateway.get("status") or {}).get("listeners") or []}
        hosts: dict[str, int] = {}
        listeners: list[Obj] = []
        kept: set[tuple[str, str]] = set()
        for listener in (gateway.get("spec") or {}).get("listeners") or []:
            name = str(listener.get("name"))
            http = listener.get("protocol") == "HTTP"
            conditions = (old.get(name) or {}).get("conditions")
            if http:
                key = (uid_of(gateway), name)
                kept.add(key)
                if key not in self._servers:
                    server = ApiHttpServer(("127.0.0.1", 0),
                                           _Router(self.store, gateway, name, self.rng),
                                           _Handler)
                    server.serve_in_background(f"sandbox-gateway-{name_of(gateway)}-{name}",
                                               poll_interval=0.05)
                    self._servers[key] = server
                hosts[name] = self._servers[key].port
            why = "" if http else f"protocol {listener.get('protocol')} is not simulated"
            for kind, ok, reason in (
                    ("Accepted", http, "Accepted" if http else "UnsupportedProtocol"),
                    ("Programmed", http, "Programmed" if http else "Invalid"),
                    ("ResolvedRefs", True, "ResolvedRefs"),
                    ("Conflicted", False, "NoConflicts")):
                conditions = condition(conditions, kind, ok, reason, why, now, extra=extra)
            listeners.append({
                "name": name, "supportedKinds": _ROUTE_KIND if http else [],
                "attachedRoutes": sum(1 for r in routes if name in
                                      _listeners_for(self.store, gateway, r)),
                "conditions": conditions})
        text = json.dumps(hosts, sort_keys=True)
        if annotations_of(gateway).get(ANNOTATION_HOST_PORTS) != text:
            patch_quietly(self.store, GATEWAYS, gateway,
                          {"metadata": {"annotations": {ANNOTATION_HOST_PORTS: text}}})
            gateway = self.store.try_get(*GATEWAYS, name_of(gateway), namespace_of(gateway)) \
                or gateway
        programmed = bool(hosts)
        status = dict(gateway.get("status") or {})
        conditions = status.get("conditions")
        conditions = condition(conditions, "Accepted", True, "Accepted", "", now, extra=extra)
        conditions = condition(conditions, "Programmed", programmed,
                               "Programmed" if programmed else "Invalid",
                               "" if programmed else "no HTTP listener", now, extra=extra)
        status.update(conditions=conditions, listeners=listeners,
                      addresses=[{"type": "IPAddress", "value": "127.0.0.1"}] if programmed
                      else [])
        replace_status(self.store, GATEWAYS, gateway, status)
        return kept

    def _route_status(self, route: Obj, gateways: list[Obj]) -> None:
        now, generation = timestamp(self.clock), route["metadata"].get("generation", 1)
        extra = {"observedGeneration": generation}
        status = dict(route.get("status") or {})
        parents = [p for p in status.get("parents") or []
                   if p.get("controllerName") != GKE_CONTROLLER]
        ours = {json.dumps(p.get("parentRef"), sort_keys=True): p
                for p in status.get("parents") or [] if p.get("controllerName") == GKE_CONTROLLER}
        refs = [_resolve(self.store, route, ref)
                for rule in (route.get("spec") or {}).get("rules") or []
                for ref in rule.get("backendRefs") or []]
        bad = next((r for r in refs if r.invalid), None)
        for parent in (route.get("spec") or {}).get("parentRefs") or []:
            gateway = next((g for g in gateways if _parent_is(parent, route, g)), None)
            if gateway is None:
                continue
            key = json.dumps(parent, sort_keys=True)
            conditions = (ours.get(key) or {}).get("conditions")
            attached = bool(_listeners_for(self.store, gateway, route))
            conditions = condition(
                conditions, "Accepted", attached,
                "Accepted" if attached else "NotAllowedByListeners",
                "" if attached else "no listener of the Gateway allows this route", now,
                extra=extra)
            message = "" if bad is None else _MESSAGES[bad.invalid].format(
                ns=bad.namespace, name=bad.name, port=bad.port_asked)
            conditions = condition(conditions, "ResolvedRefs", bad is None,
                                   "ResolvedRefs" if bad is None else bad.invalid, message,
                                   now, extra=extra)
            parents.append({"parentRef": parent, "controllerName": GKE_CONTROLLER,
                            "conditions": conditions})
        if parents or status.get("parents"):
            status["parents"] = parents
            replace_status(self.store, HTTPROUTES, route, status)
