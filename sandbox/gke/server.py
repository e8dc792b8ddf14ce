"""The sandbox GKE API over HTTP: Container API v1 REST routes and a control surface.

google-cloud-container's REST transport talks to it unchanged
(``ClusterManagerClient(transport="rest", credentials=AnonymousCredentials(),
client_options=ClientOptions(api_endpoint=server.url))``). Served with the
standard library's ``ThreadingHTTPServer`` on 127.0.0.1, HTTP/1.1 keep-alive.

Container API routes (``/v1/projects/P/locations/L/...``): clusters get/list,
node pools list/get/create/delete/``:setSize``/``:setAutoscaling``, operations
get/list. Each is recorded in :attr:`GkeApiServer.request_log`.

Control surface for processes that cannot reach the Python objects (never
recorded, never hit by injected faults)::

    POST   /sandbox/v1/faults      {"status", "http_code", "count" | "for_seconds",
                                    "methods", "message", "path_contains"}
           /sandbox/v1/faults      {"kind": "upgrade", "for_seconds", "cluster"}: an
                                    UPGRADE_MASTER operation that blocks node-pool
                                    operations (FAILED_PRECONDITION) while it runs
           /sandbox/v1/faults      {"kind": "stockout" | "quota", "for_seconds",
                                    "cluster", "message"}: creates accepted meanwhile
                                    end in ERROR with GKE's stockout / quota message
           /sandbox/v1/faults      {"kind": "latency", "seconds": 0.1}: every
                                    Container API request waits that many real
                                    seconds before it is handled (0: none)
           /sandbox/v1/faults      {"kind": "preemption", "pool", "node",
                                    "for_seconds", "cluster"}: Compute Engine
                                    reclaims a Spot VM of the pool (the node named,
                                    else one running pods): its pods fail with
                                    DisruptionTarget, the node is NotReady until
                                    recreated for_seconds later (default 180)
           /sandbox/v1/faults      {"kind": "maintenance", "pool", "for_seconds",
                                    "cluster"}: a host maintenance event on every
                                    VM of the pool (a TPU slice), back after
                                    for_seconds (default 600)
    GET    /sandbox/v1/faults      armed faults, open stockout windows, "latency"
    DELETE /sandbox/v1/faults      disarm everything (pool errors, stockouts and
                                    latency too; a running upgrade ends on its own)
    POST   /sandbox/v1/pool-error  {"count", "status", "message"}: next create fails
    GET    /sandbox/v1/limits      {"concurrent_operations": N} per cluster
    POST   /sandbox/v1/limits      {"concurrent_operations": N}
    GET    /sandbox/v1/clock       {"now", "time", "speed"}
    POST   /sandbox/v1/clock       {"speed": x} and/or {"advance": seconds}
    GET    /sandbox/v1/requests    the request log
    GET    /sandbox/v1/operations  operation history with simulated start/end times

Injected latency (``server.faults.set_latency(0.1)`` from Python) is real time,
not simulated: it stands for the network and the service's own work, which a
benchmark of many calls measures in wall-clock seconds. The wait happens on the
request's own thread (``ThreadingHTTPServer``: one per connection), so
concurrent requests overlap their waits — N calls in parallel take about one
latency, not N — and the request log's times are those of arrival, before it.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from sandbox.common.httpserver import ApiHttpServer, ApiRequestHandler
from sandbox.common.statefile import load_state, save_state
from sandbox.gke.driver import OperationDriver
from sandbox.gke.errors import GkeError, JsonObject
from sandbox.gke.faults import MUTATING, FaultInjector
from sandbox.gke.records import Cluster, rfc3339
from sandbox.gke.state import DISRUPTION_SECONDS, GkeState
from sandbox.gke.wire import decode_request, encode_response, wants_int_enums

__all__ = ["GkeApiServer", "RequestLog", "RequestRecord"]

log = logging.getLogger(__name__)

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost"})
_MAX_BODY = 4 * 1024 * 1024
_CONTROL = "/sandbox/v1/"


@dataclass(frozen=True)
class RequestRecord:
    """One Container API call: simulated and wall-clock time, method, path, HTTP status."""

    time: float  # simulated epoch seconds when the request arrived
    wall: float  # time.time() when it arrived
    method: str
    path: str  # without the query string
    status: int


class RequestLog:
    """Thread-safe, bounded log of Container API calls (for benchmarks and tests)."""

    def __init__(self, maxlen: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._records: collections.deque[RequestRecord] = collections.deque(maxlen=maxlen)

    def append(self, record: RequestRecord) -> None:
        with self._lock:
            self._records.append(record)

    def entries(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._records)

    def count(self, method: str | None = None, path_contains: str | None = None) -> int:
        return sum(1 for r in self.entries()
                   if (method is None or r.method == method)
                   and (path_contains is None or path_contains in r.path))

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def __iter__(self) -> Iterator[RequestRecord]:
        return iter(self.entries())


# ---------------------------------------------------------------------- routing

_Handler = Callable[["GkeApiServer", dict[str, str], bytes], tuple[str, JsonObject]]
_BASE = r"/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
_CLUSTER = _BASE + r"/clusters/(?P<cluster>[^/:]+)"
_POOL = _CLUSTER + r"/nodePools/(?P<pool>[^/:]+)"


def _loc(p: dict[str, str]) -> tuple[str, str]:
    return p["project"], p["location"]


def _pool_args(p: dict[str, str]) -> tuple[str, str, str, str]:
    return p["project"], p["location"], p["cluster"], p["pool"]


def _list_clusters(api: GkeApiServer, p: dict[str, str], body: bytes) -> tuple[str, JsonObject]:
    return "ListClustersResponse", {"clusters": api.state.list_clusters(*_loc(p))}


def _get_cluster(api: GkeApiServer, p: dict[str, str], body: bytes) -> tuple[str, JsonObject]:
    return "Cluster", api.state.get_cluster(*_loc(p), p["cluster"])


def _list_pools(api: GkeApiServer, p: dict[str, str], body: bytes) -> tuple[str, JsonObject]:
    return "ListNodePoolsResponse", {"nodePools": api.state.list_node_pools(*_loc(p),
                                                                            p["cluster"])}


def _create_pool(api: GkeApiServer, p: dict[str, str], body: bytes) -> tuple[str, JsonObject]:
    request = decode_request("CreateNodePoolRequest", body)
    return "Operation", api.state.create_node_pool(*_loc(p), p["cluster"],
                                                   request.get("nodePool", {}))


def _get_pool(api: GkeApiServer, p: dict[str, str], body: bytes) -> tuple[str, JsonObject]:
    return "NodePool", api.state.get_node_pool(*_pool_args(p))


def _delete_pool(api: GkeApiServer, p: dict[str, str], body: bytes) -> tuple[str, JsonObject]:
    return "Operation", api.state.delete_node_pool(*_pool_args(p))


def _set_size(api: GkeApiServer, p: dict[str, str], body: bytes) -> tuple[str, JsonObject]:
    request = decode_request("SetNodePoolSizeRequest", body)
    count = int(request.get("nodeCount", 0))  # proto3 JSON omits 0
    return "Operation", api.state.set_node_pool_size(*_pool_args(p), count)


def _set_autoscaling(api: GkeApiServer, p: dict[str, str],
                     body: bytes) -> tuple[str, JsonObject]:
    request = decode_request("SetNodePoolAutoscalingRequest", body)
    return "Operation", api.state.set_node_pool_autoscaling(*_pool_args(p),
                                                            request.get("autoscaling", {}))


def _list_ops(api: GkeApiServer, p: dict[str, str], body: bytes) -> tuple[str, JsonObject]:
    return "ListOperationsResponse", {"operations": api.state.list_operations(*_loc(p))}


def _get_op(api: GkeApiServer, p: dict[str, str], body: bytes) -> tuple[str, JsonObject]:
    return "Operation", api.state.get_operation(*_loc(p), p["operation"])


_ROUTES: tuple[tuple[str, re.Pattern[str], _Handler], ...] = tuple(
    (method, re.compile(pattern + "$"), handler)
    for method, pattern, handler in (
        ("GET", _BASE + r"/clusters", _list_clusters),
        ("GET", _CLUSTER, _get_cluster),
        ("GET", _CLUSTER + r"/nodePools", _list_pools),
        ("POST", _CLUSTER + r"/nodePools", _create_pool),
        ("GET", _POOL, _get_pool),
        ("DELETE", _POOL, _delete_pool),
        ("POST", _POOL + r":setSize", _set_size),
        ("POST", _POOL + r":setAutoscaling", _set_autoscaling),
        ("GET", _BASE + r"/operations", _list_ops),
        ("GET", _BASE + r"/operations/(?P<operation>[^/:]+)", _get_op),
    )
)


# ---------------------------------------------------------------------- HTTP plumbing


class _HttpServer(ApiHttpServer["GkeApiServer"]):
    def __init__(self, address: tuple[str, int], api: GkeApiServer) -> None:
        super().__init__(address, api, _RequestHandler)


class _RequestHandler(ApiRequestHandler):
    server: _HttpServer
    server_version = "sandbox-gke"

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_BODY:
            code, payload = 413, json.dumps(GkeError(
                "INVALID_ARGUMENT", "Request body too large.", 413).body()).encode()
            self.close_connection = True
        else:
            body = self.rfile.read(length) if length else b""
            split = urlsplit(self.path)
            code, payload = self.server.api.dispatch(
                method, unquote(split.path), parse_qs(split.query), body)
        self.send_body(code, payload, "application/json; charset=UTF-8")


class GkeApiServer:
    """The sandbox Container API on 127.0.0.1 (see :func:`sandbox.gke.start_gke_api`).

    ``state`` is shared with in-process simulators (``state.subscribe``);
    ``faults`` arms injected errors; ``request_log`` records every API call.
    ``state_file`` is loaded at :meth:`start` (if it exists) and saved at :meth:`stop`.
    """

    def __init__(self, state: GkeState, host: str = "127.0.0.1", port: int = 0, *,
                 state_file: str | os.PathLike[str] | None = None,
                 driver_max_real: float = 0.05) -> None:
        if host not in LOOPBACK_HOSTS:
            raise ValueError(f"the sandbox GKE API binds to loopback only, not {host!r}")
        self.host = "127.0.0.1"
        self.state = state
        self.state_file = Path(state_file) if state_file is not None else None
        self.request_log = RequestLog()
        self.driver = OperationDriver(state, max_real=driver_max_real)
        self._port = port
        self._httpd: _HttpServer | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> GkeApiServer:
        """Load ``state_file``, bind, serve in a daemon thread, start the operation driver."""
        if self._httpd is not None:
            raise RuntimeError("server already started")
        if self.state_file is not None:
            load_state(self.state, self.state_file)
        httpd = _HttpServer((self.host, self._port), self)
        self._port = httpd.port
        self._httpd = httpd
        httpd.serve_in_background(f"sandbox-gke-{self._port}", poll_interval=0.02)
        self.driver.start()
        log.info("sandbox GKE API serving at %s", self.url)
        return self

    def stop(self) -> None:
        """Stop serving and driving operations, drop connections, save ``state_file``."""
        httpd = self._httpd
        if httpd is None:
            return
        self._httpd = None
        httpd.close()
        self.driver.stop()
        if self.state_file is not None:
            save_state(self.state, self.state_file)

    @property
    def running(self) -> bool:
        return self._httpd is not None

    def __enter__(self) -> GkeApiServer:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ accessors

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._port}"

    @property
    def faults(self) -> FaultInjector:
        return self.state.faults

    @property
    def clusters(self) -> list[Cluster]:
        return self.state.clusters()

    # ------------------------------------------------------------------ requests

    def dispatch(self, method: str, path: str, query: dict[str, list[str]],
                 body: bytes) -> tuple[int, bytes]:
        """Serve one request; returns (HTTP status, JSON payload)."""
        if path.startswith(_CONTROL):
            return self._control(method, path[len(_CONTROL):], body)
        arrived, wall = self.state.clock.time(), time.time()
        latency = self.state.faults.latency
        if latency:
            time.sleep(latency)
        code, payload = self._api(method, path, query, body)
        self.request_log.append(RequestRecord(arrived, wall, method, path, code))
        return code, payload

    def _api(self, method: str, path: str, query: dict[str, list[str]],
             body: bytes) -> tuple[int, bytes]:
        try:
            injected = self.state.faults.check(method, path)
            if injected is not None:
                raise injected
            for route_method, pattern, handler in _ROUTES:
                match = pattern.match(path)
                if match and route_method == method:
                    message_type, data = handler(self, match.groupdict(), body)
                    return 200, encode_response(message_type, data,
                                                int_enums=wants_int_enums(query))
            raise GkeError("NOT_FOUND", f"The requested URL {method} {path} was not found.")
        except GkeError as exc:
            return exc.http_code, json.dumps(exc.body()).encode()
        except Exception as exc:
            log.exception("sandbox GKE API failed on %s %s", method, path)
            error = GkeError("INTERNAL", f"Internal error: {exc}")
            return error.http_code, json.dumps(error.body()).encode()

    def _control(self, method: str, what: str, body: bytes) -> tuple[int, bytes]:
        try:
            data = json.loads(body) if body.strip() else {}
            if not isinstance(data, dict):
                raise GkeError("INVALID_ARGUMENT", "Expected a JSON object.")
            result = self._control_action(method, what, data)
            return 200, json.dumps(result).encode()
        except GkeError as exc:
            return exc.http_code, json.dumps(exc.body()).encode()
        except (ValueError, TypeError) as exc:
            error = GkeError("INVALID_ARGUMENT", str(exc))
            return error.http_code, json.dumps(error.body()).encode()

    def _control_action(self, method: str, what: str, data: JsonObject) -> JsonObject:
        faults, clock = self.state.faults, self.state.clock
        if (method, what) == ("POST", "faults") and data.get("kind") == "latency":
            if "seconds" not in data:
                raise ValueError("a 'latency' fault needs seconds (real seconds per request)")
            faults.set_latency(float(data["seconds"]))
            return self._faults_json()
        if (method, what) == ("POST", "faults") and data.get("kind") in DISRUPTION_SECONDS:
            return self._disruption(data)
        if (method, what) == ("POST", "faults") and "kind" in data:
            return self._window_fault(data)
        if (method, what) == ("POST", "faults"):
            methods = data.get("methods", list(MUTATING))
            options: dict[str, Any] = {
                "status": data.get("status"), "http_code": data.get("http_code"),
                "methods": None if methods is None else [str(m) for m in methods],
                "message": data.get("message"), "path_contains": data.get("path_contains"),
            }
            if "for_seconds" in data:
                faults.fail_for(float(data["for_seconds"]), **options)
            else:
                faults.fail_next(int(data.get("count", 1)), **options)
            return self._faults_json()
        if (method, what) == ("GET", "faults"):
            return self._faults_json()
        if (method, what) == ("DELETE", "faults"):
            faults.clear()
            return self._faults_json()
        if (method, what) == ("POST", "pool-error"):
            extra = {k: str(data[k]) for k in ("status", "message") if k in data}
            faults.fail_next_create_with_pool_error(int(data.get("count", 1)), **extra)
            return self._faults_json()
        if what == "limits" and method in ("GET", "POST"):
            if "concurrent_operations" in data:
                limit = int(data["concurrent_operations"])
                if limit < 1:
                    raise ValueError("concurrent_operations must be at least 1")
                self.state.max_concurrent_operations = limit
            return {"concurrent_operations": self.state.max_concurrent_operations}
        if what == "clock" and method in ("GET", "POST"):
            if method == "POST":
                if "speed" in data:
                    clock.set_speed(float(data["speed"]))
                if "advance" in data:
                    clock.advance(float(data["advance"]))
                self.state.tick()
            now = clock.time()
            return {"now": rfc3339(now), "time": now, "speed": clock.speed}
        if (method, what) == ("GET", "requests"):
            return {"requests": [asdict(r) for r in self.request_log.entries()]}
        if (method, what) == ("GET", "operations"):
            return {"operations": [asdict(op) for op in self.state.operations()]}
        raise GkeError("NOT_FOUND", f"No sandbox control endpoint {method} {_CONTROL}{what}.")

    def _window_fault(self, data: JsonObject) -> JsonObject:
        """``{"kind": "upgrade" | "stockout" | "quota", "for_seconds", ...}``."""
        kind = str(data["kind"])
        if "for_seconds" not in data:
            raise ValueError(f"a {kind!r} fault needs for_seconds")
        seconds = float(data["for_seconds"])
        cluster = None if data.get("cluster") is None else str(data["cluster"])
        if kind == "upgrade":
            operations = self.state.upgrade_for(seconds, cluster)
            return {**self._faults_json(), "operations": operations}
        if kind in ("stockout", "quota"):
            message = None if data.get("message") is None else str(data["message"])
            self.state.faults.stockout_for(seconds, reason=kind, cluster=cluster,
                                           message=message)
            return self._faults_json()
        raise ValueError(f"unknown fault kind {kind!r} (upgrade, stockout, quota, latency, "
                         f"preemption, maintenance)")

    def _disruption(self, data: JsonObject) -> JsonObject:
        """``{"kind": "preemption" | "maintenance", "pool", "node", "for_seconds",
        "cluster"}``: the disruption as started."""
        if not data.get("pool"):
            raise ValueError(f"a {data['kind']!r} fault needs the pool whose nodes it hits")
        seconds = None if data.get("for_seconds") is None else float(data["for_seconds"])
        cluster = None if data.get("cluster") is None else str(data["cluster"])
        node = None if data.get("node") is None else str(data["node"])
        disruption = self.state.disrupt(str(data["kind"]), str(data["pool"]), cluster=cluster,
                                        node=node, for_seconds=seconds)
        return {**self._faults_json(), "disruption": disruption}

    def _faults_json(self) -> JsonObject:
        faults = self.state.faults
        return {
            "faults": [{**asdict(f), "methods": None if f.methods is None else sorted(f.methods)}
                       for f in faults.armed()],
            "poolErrors": faults.pending_pool_errors(),
            "stockouts": [asdict(w) for w in faults.stockouts()],
            "injected": faults.injected,
            "latency": faults.latency,
        }
