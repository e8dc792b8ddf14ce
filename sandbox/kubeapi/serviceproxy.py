"""The ``services/proxy`` subresource: kube-apiserver's HTTP proxy to a Service's endpoint.

``/api/v1/namespaces/NS/services/ID/proxy/PATH`` is relayed to one ready endpoint of
the Service as ``PATH`` (query and body kept), and the endpoint's answer comes back as
it is. ``ID`` is ``name``, ``name:port`` or ``scheme:name:port``
(``k8s.io/apimachinery``'s ``SplitSchemeNamePort``), the port given by the Service
port's name or number. The real server resolves it in ``ResourceLocation``
(``pkg/registry/core/service/storage/storage.go``), and so does :func:`locate`, with
its answers:

* an id that does not split (four parts, an empty name, a scheme other than http or
  https): 400 ``invalid service request "ID"``;
* a port number the Service does not have: 503 ``no service port 9999 found for
  service "NAME"``; no such Service: 404 ``services "NAME" not found``;
* no Endpoints object: 404 ``endpoints "NAME" not found``; one without subsets:
  503 ``no endpoints available for service "NAME"``;
* no ready address serving that port (a port name the Service does not have
  included): 503 ``no endpoints available for service "ID"`` — the id, as the real
  server words it;
* an endpoint that does not answer: 503 ``error trying to reach service: ...``
  (``pkg/registry/core/service/proxy.go``'s responder).

An endpoint address counts only when its ``targetRef`` is a pod of the namespace
that still has that IP (the real ``isValidAddress``). The pod's IP is simulated:
where its port listens on this machine is the caller's to say (``pod_address``,
the process kubelet's host ports), so this module stays free of the cluster's code.

Authorization happens before, on the request's attributes: resource ``services``,
subresource ``proxy``, name ``ID`` (``locust-master:8089``, port included: a Role's
``resourceNames`` must name it that way), verb from the method (GET ``get``, POST
``create``). The ``Authorization`` header is not relayed: kube-apiserver's
authentication filter removes it from the request once it has authenticated it.
"""

from __future__ import annotations

import http.client
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from sandbox.kubeapi.errors import ApiError, JsonObject
from sandbox.kubeapi.store import ObjectStore

__all__ = ["PodAddress", "Upstream", "forward", "locate", "proxy_path", "split_id"]

# (pod, container port) -> (host, port) where that port listens here, or None.
PodAddress = Callable[[Mapping[str, Any], int], "tuple[str, int] | None"]

UPSTREAM_TIMEOUT = 60.0
_SCHEMES = ("", "http", "https")
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate",
                         "proxy-authorization", "te", "trailer", "transfer-encoding",
                         "upgrade", "content-length", "authorization", "host"})


@dataclass(frozen=True, slots=True)
class Upstream:
    """The endpoint a proxied request goes to: the pod and the port it serves on."""

    scheme: str
    pod: JsonObject
    port: int


def split_id(service_id: str) -> tuple[str, str, str] | None:
    """``(scheme, name, port)`` of ``name``, ``name:port`` or ``scheme:name:port``; None
    for anything else (``SplitSchemeNamePort``)."""
    parts = service_id.split(":")
    if len(parts) == 1:
        scheme, name, port = "", parts[0], ""
    elif len(parts) == 2:
        scheme, name, port = "", parts[0], parts[1]
    elif len(parts) == 3:
        scheme, name, port = parts
    else:
        return None
    return (scheme, name, port) if name and scheme in _SCHEMES else None


def proxy_path(path: str) -> tuple[str, str, str] | None:
    """``(namespace, id, path on the endpoint)`` of a ``services/ID/proxy`` request path,
    None for any other path."""
    parts = [unquote(part) for part in path.split("/")]
    # ["", "api", "v1", "namespaces", NS, "services", ID, "proxy", ...]
    if len(parts) < 8 or parts[1:4] != ["api", "v1", "namespaces"] \
            or parts[5] != "services" or parts[7] != "proxy":
        return None
    return parts[4], parts[6], "/" + "/".join(parts[8:])


def _unavailable(message: str) -> ApiError:
    return ApiError(503, "ServiceUnavailable", message)


def locate(store: ObjectStore, namespace: str, service_id: str,
           choose: Callable[[int], int] = random.randrange) -> Upstream:
    """The endpoint ``service_id`` names, chosen as kube-apiserver chooses it (a random
    subset, then a random valid address); ApiError with the real server's answer
    otherwise (see the module docstring)."""
    split = split_id(service_id)
    if split is None:
        raise ApiError.bad_request(f'invalid service request "{service_id}"')
    scheme, name, port = split
    if port.isdigit():
        service = store.try_get("", "services", name, namespace)
        if service is None:
            raise ApiError.not_found("", "services", name)
        number = int(port)
        for entry in (service.get("spec") or {}).get("ports") or []:
            if int(entry.get("port") or 0) == number:
                port = str(entry.get("name") or "")
                break
        else:
            raise _unavailable(f'no service port {number} found for service "{name}"')
    endpoints = store.try_get("", "endpoints", name, namespace)
    if endpoints is None:
        raise ApiError.not_found("", "endpoints", name)
    subsets = endpoints.get("subsets") or []
    if not subsets:
        raise _unavailable(f'no endpoints available for service "{name}"')
    start = choose(len(subsets))
    for offset in range(len(subsets)):
        subset = subsets[(start + offset) % len(subsets)]
        addresses = subset.get("addresses") or []
        if not addresses:
            continue
        for entry in subset.get("ports") or []:
            if str(entry.get("name") or "") != port:
                continue
            first = choose(len(addresses))
            for tried in range(len(addresses)):
                address = addresses[(first + tried) % len(addresses)]
                pod = _valid_pod(store, namespace, address)
                if pod is not None:
                    return Upstream(scheme or "http", pod, int(entry["port"]))
    raise _unavailable(f'no endpoints available for service "{service_id}"')


def _valid_pod(store: ObjectStore, namespace: str,
               address: Mapping[str, Any]) -> JsonObject | None:
    """The address's pod if it is in this namespace and still has the address's IP."""
    ref = address.get("targetRef") or {}
    if not ref or ref.get("namespace") != namespace:
        return None
    pod = store.try_get("", "pods", str(ref.get("name") or ""), namespace)
    if pod is None:
        return None
    status = pod.get("status") or {}
    ips = {str(item.get("ip")) for item in status.get("podIPs") or []}
    ips.add(str(status.get("podIP") or ""))
    return pod if address.get("ip") in ips else None


@dataclass(frozen=True, slots=True)
class Relayed:
    """The endpoint's answer."""

    code: int
    body: bytes
    content_type: str | None
    headers: dict[str, str]


def forward(upstream: Upstream, pod_address: PodAddress | None, method: str, path: str,
            query: str, body: bytes, headers: Mapping[str, list[str]]) -> Relayed:
    """Send the request to the endpoint and read its whole answer (the load
    generator's web API answers small JSON documents). 503 ApiError when it cannot be
    reached."""
    meta = upstream.pod.get("metadata") or {}
    where = pod_address(upstream.pod, upstream.port) if pod_address is not None else None
    pod_ip = (upstream.pod.get("status") or {}).get("podIP") or "?"
    target = f"{pod_ip}:{upstream.port}"
    if where is None:
        raise _unavailable(f"error trying to reach service: dial tcp {target}: connect: "
                           f"connection refused (pod {meta.get('name')} listens nowhere "
                           "on this machine)")
    if upstream.scheme != "http":
        raise _unavailable(f"error trying to reach service: {upstream.scheme} to {target}: "
                           "the sandbox's endpoints speak plain HTTP")
    send = {name: values[-1] for name, values in headers.items()
            if name.lower() not in _HOP_BY_HOP and values}
    if body:
        send["Content-Length"] = str(len(body))
    connection = http.client.HTTPConnection(*where, timeout=UPSTREAM_TIMEOUT)
    try:
        connection.request(method, quote(path, safe="/%:@!$&'()*+,;=-._~")
                           + (f"?{query}" if query else ""), body=body or None, headers=send)
        response = connection.getresponse()
        data = response.read()
    except (OSError, http.client.HTTPException) as exc:
        raise _unavailable(f"error trying to reach service: dial tcp {target}: {exc}") from exc
    finally:
        connection.close()
    relayed = {key: value for key, value in response.getheaders()
               if key.lower() not in _HOP_BY_HOP and key.lower() not in ("content-type",
                                                                          "date", "server")}
    return Relayed(response.status, data, response.getheader("Content-Type"), relayed)
