"""Services reachable from the host: one loopback proxy per Service port.

For every Service with a selector (headless and ExternalName Services excepted,
as kube-proxy skips them) the controller keeps a :class:`ServiceProxy` per
entry of ``spec.ports`` on a free 127.0.0.1 port, for the Service's life. Its
endpoints are the selected pods that are Ready and not being deleted, reached
at the host port the process kubelet gave the port's ``targetPort`` (number or
container port name; default ``port``). Pods that are not processes have no
host port and are never endpoints.

Where a client finds the proxy:

* annotation ``sandbox.accelops.dev/host-ports``: ``{"http": 40123, ...}``, keyed
  by port name (the port number as text for an unnamed port), on every such
  Service;
* for ``type: LoadBalancer``, ``status.loadBalancer.ingress`` =
  ``[{"ip": "127.0.0.1", "ports": [{"port": 40123, "protocol": "TCP"}, ...]}]``
  in the order of ``spec.ports``. On GKE that port is the Service's own port on
  the load balancer's address; here every Service shares 127.0.0.1, so it is the
  host port, the one to connect to. ClusterIP Services get no ingress, as on GKE.

Services the ``skip`` predicate claims are left alone, Endpoints included (those of
the controller managers' Services: :mod:`sandbox.cluster.managers`).

The controller also keeps the core ``Endpoints`` object (same name as the
Service: ``addresses`` for ready pods, ``notReadyAddresses`` for the others;
terminating pods are in neither, as with the endpoints controller).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from sandbox.cluster.objects import (
    ANNOTATION_HOST_PORTS,
    ENDPOINTS,
    PODS,
    SERVICES,
    Obj,
    annotations_of,
    deleting,
    is_true,
    labels_of,
    name_of,
    namespace_of,
    patch_quietly,
    pod_terminated,
    timestamp,
    uid_of,
)
from sandbox.cluster.probes import container_port
from sandbox.cluster.proxy import ServiceProxy
from sandbox.common.clock import SimClock
from sandbox.kubeapi import ApiError, ObjectStore

__all__ = ["ServiceController", "host_ports_of", "pod_address"]

ANNOTATION_TRIGGER = "endpoints.kubernetes.io/last-change-trigger-time"


def host_ports_of(pod: Mapping[str, Any]) -> dict[int, int]:
    """``{containerPort: hostPort}`` the process kubelet published on a pod."""
    raw = annotations_of(pod).get(ANNOTATION_HOST_PORTS)
    try:
        return {int(k): int(v) for k, v in json.loads(raw).items()} if raw else {}
    except (TypeError, ValueError, AttributeError):
        return {}


def pod_address(pod: Mapping[str, Any], container_port: int) -> tuple[str, int] | None:
    """Where a process pod's ``container_port`` listens here (its host port), None for a
    simulated pod: what the API server's ``services/proxy`` connects to, as it connects
    to a pod IP on a cluster."""
    host = host_ports_of(pod).get(container_port)
    return ("127.0.0.1", host) if host is not None else None


def _target(pod: Mapping[str, Any], port: Mapping[str, Any]) -> int | None:
    """The containerPort a Service port's ``targetPort`` means on this pod."""
    target = port.get("targetPort", port.get("port"))
    for container in (pod.get("spec") or {}).get("containers") or []:
        resolved = container_port(target, container)
        if resolved is not None and (isinstance(target, int) or any(
                p.get("containerPort") == resolved for p in container.get("ports") or [])):
            return resolved
    return target if isinstance(target, int) else None


def _proxied(service: Mapping[str, Any]) -> bool:
    spec: Mapping[str, Any] = service.get("spec") or {}
    return bool(spec.get("selector")) and bool(spec.get("ports")) \
        and spec.get("clusterIP") != "None" and spec.get("type") != "ExternalName" \
        and not deleting(service)


class ServiceController:
    """Proxies, host-port publishing and Endpoints of Services; see the module docstring."""

    def __init__(self, store: ObjectStore, clock: SimClock, *,
                 skip: Callable[[Obj], bool] | None = None) -> None:
        self.store = store
        self.clock = clock
        self._skip = skip or (lambda service: False)
        self._proxies: dict[tuple[str, int], ServiceProxy] = {}

    def reconcile(self) -> None:
        skipped: list[Obj] = []
        services: list[Obj] = []
        for service in self.store.list(*SERVICES):
            if self._skip(service):
                skipped.append(service)
            elif _proxied(service):
                services.append(service)
        pods: dict[str, list[Obj]] = {}
        for pod in self.store.list(*PODS):
            if (pod.get("spec") or {}).get("nodeName") and not pod_terminated(pod):
                pods.setdefault(namespace_of(pod), []).append(pod)
        kept: set[tuple[str, int]] = set()
        for service in services:
            selector: Mapping[str, str] = (service.get("spec") or {}).get("selector") or {}
            members = [p for p in pods.get(namespace_of(service), [])
                       if all(labels_of(p).get(k) == v for k, v in selector.items())]
            host_ports = []
            for index, port in enumerate((service.get("spec") or {}).get("ports") or []):
                key = (uid_of(service), index)
                kept.add(key)
                proxy = self._proxies.get(key)
                if proxy is None:
                    proxy = self._proxies[key] = ServiceProxy(
                        f"{namespace_of(service)}/{name_of(service)}:{port.get('port')}")
                proxy.set_endpoints([
                    host for pod in members
                    if is_true(pod, "Ready") and not deleting(pod)
                    and (target := _target(pod, port)) is not None
                    and (host := host_ports_of(pod).get(target)) is not None])
                host_ports.append(proxy.port)
            self._publish(service, host_ports)
            self._endpoints(service, members)
        for key in [k for k in self._proxies if k not in kept]:
            self._proxies.pop(key).close()
        self._drop_orphaned_endpoints({(namespace_of(s), name_of(s))
                                       for s in [*services, *skipped]})

    def close(self) -> None:
        """Stop every proxy."""
        for proxy in self._proxies.values():
            proxy.close()
        self._proxies.clear()

    # ------------------------------------------------------------------ writes

    def _publish(self, service: Obj, host_ports: list[int]) -> None:
        ports = (service.get("spec") or {}).get("ports") or []
        named = {str(p.get("name") or p.get("port")): host for p, host in zip(ports, host_ports,
                                                                             strict=True)}
        text = json.dumps(named)
        if annotations_of(service).get(ANNOTATION_HOST_PORTS) != text:
            patch_quietly(self.store, SERVICES, service,
                          {"metadata": {"annotations": {ANNOTATION_HOST_PORTS: text}}})
        if (service.get("spec") or {}).get("type") != "LoadBalancer":
            return
        balancer = {"ingress": [{"ip": "127.0.0.1", "ports": [
            {"port": host, "protocol": str(p.get("protocol") or "TCP")}
            for p, host in zip(ports, host_ports, strict=True)]}]}
        if ((service.get("status") or {}).get("loadBalancer") or {}) != balancer:
            patch_quietly(self.store, SERVICES, service, {"status": {"loadBalancer": balancer}},
                          subresource="status")

    def _endpoints(self, service: Obj, members: list[Obj]) -> None:
        ports = (service.get("spec") or {}).get("ports") or []
        ready: list[Obj] = []
        not_ready: list[Obj] = []
        for pod in members:
            if deleting(pod):
                continue  # terminating pods leave Endpoints (EndpointSlices would flag them)
            address: Obj = {"ip": str((pod.get("status") or {}).get("podIP") or ""),
                            "nodeName": str((pod.get("spec") or {}).get("nodeName")),
                            "targetRef": {"kind": "Pod", "name": name_of(pod),
                                          "namespace": namespace_of(pod), "uid": uid_of(pod)}}
            if address["ip"]:
                (ready if is_true(pod, "Ready") else not_ready).append(address)
        subsets: list[Obj] = []
        if ready or not_ready:
            first = members[0]
            subset: Obj = {"ports": [
                {**({"name": p["name"]} if p.get("name") else {}),
                 "port": _target(first, p) or p.get("port"),
                 "protocol": str(p.get("protocol") or "TCP")} for p in ports]}
            if ready:
                subset["addresses"] = ready
            if not_ready:
                subset["notReadyAddresses"] = not_ready
            subsets.append(subset)
        name, namespace = name_of(service), namespace_of(service)
        current = self.store.try_get(*ENDPOINTS, name, namespace)
        if current is not None and (current.get("subsets") or []) == subsets:
            return
        body: Obj = {"apiVersion": "v1", "kind": "Endpoints",
                     "metadata": {"name": name, "namespace": namespace,
                                  "labels": labels_of(service),
                                  "annotations": {ANNOTATION_TRIGGER: timestamp(self.clock)}},
                     "subsets": subsets}
        try:
            if current is None:
                self.store.create(*ENDPOINTS, body, namespace=namespace)
            else:
                self.store.patch(*ENDPOINTS, name, {"metadata": body["metadata"],
                                                    "subsets": subsets}, namespace=namespace)
        except ApiError as exc:
            if exc.code not in (403, 404, 409):
                raise

    def _drop_orphaned_endpoints(self, services: set[tuple[str, str]]) -> None:
        for endpoints in self.store.list(*ENDPOINTS):
            if ANNOTATION_TRIGGER in annotations_of(endpoints) \
                    and (namespace_of(endpoints), name_of(endpoints)) not in services:
                try:
                    self.store.delete(*ENDPOINTS, name_of(endpoints), namespace_of(endpoints))
                except ApiError as exc:
                    if exc.code != 404:
                        raise
