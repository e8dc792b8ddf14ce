"""The sandbox Kubernetes API over HTTP: lifecycle, sockets, fault injection.

There is no kube-apiserver binary (nor Docker) on the machines this project
runs on, yet the code under test must be exercised through the official
``kubernetes`` client exactly as on GKE. This module serves
:class:`~sandbox.kubeapi.routes.ApiRouter` with the standard library's
``ThreadingHTTPServer`` on 127.0.0.1 only, speaking HTTP/1.1 keep-alive like
the real API (the client pools connections).

``stop()`` really takes the API down: it also closes kept-alive client
connections, so a test that stops the server sees connection errors until a
new server is started on the same port (``allow_reuse_address`` makes that
immediate). ``faults.fail_next(n, code)`` makes the next n requests fail.

Every request first passes :class:`~sandbox.kubeapi.access.AccessControl`:
with ``token_file=`` it is authenticated and RBAC-authorized like kube-apiserver
(``--token-auth-file``, ``--authorization-mode=RBAC``); ``access_log=`` records
each decision as a JSON line. A server with a token file speaks HTTPS (see
:mod:`sandbox.kubeapi.tls`: kubectl sends credentials to https servers only).
"""

from __future__ import annotations

import collections
import email.utils
import io
import json
import logging
import os
import select
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from sandbox.common.httpserver import ApiHttpServer, ApiRequestHandler
from sandbox.common.statefile import load_state, save_state
from sandbox.kubeapi import fields
from sandbox.kubeapi.access import AccessControl, AccessLog, ImpersonationDenied, forbidden
from sandbox.kubeapi.attributes import attributes_for
from sandbox.kubeapi.authn import UserInfo, read_token_file
from sandbox.kubeapi.errors import ApiError, status_body
from sandbox.kubeapi.faults import FaultInjector
from sandbox.kubeapi.kubeconfig import DEFAULT_CONTEXT, DEFAULT_TOKEN, write_kubeconfig
from sandbox.kubeapi.routes import DEFAULT_GIT_VERSION, ApiRouter, Request, Response, parse_query
from sandbox.kubeapi.serviceproxy import PodAddress, forward, locate, proxy_path
from sandbox.kubeapi.store import Clock, ObjectStore
from sandbox.kubeapi.tls import ServingCertificate, self_signed

log = logging.getLogger(__name__)

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost"})
_MAX_BODY = 16 * 1024 * 1024
# kube-apiserver's WithCacheControl filter. It matters here more than on a cluster: the
# Date header comes from the simulated clock, usually ahead of the client's, and a
# client's HTTP cache (kubectl's discovery cache) would otherwise take every answer
# without a validator for fresh forever, e.g. discovery from before a CRD existed.
_NO_CACHE = {"Cache-Control": "no-cache, private"}


class _HttpServer(ApiHttpServer["KubeApiServer"]):
    def __init__(self, address: tuple[str, int], api: KubeApiServer) -> None:
        super().__init__(address, api, _Handler)


class _Handler(ApiRequestHandler):
    server: _HttpServer
    server_version = "sandbox-kube-apiserver"

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_BODY:
            response = Response(413, status_body(413, "RequestEntityTooLarge", "body too large"))
            self.close_connection = True
        else:
            body = self.rfile.read(length) if length else b""
            split = urlsplit(self.path)
            headers: dict[str, list[str]] = {}
            for name, value in self.headers.items():
                headers.setdefault(name.lower(), []).append(value)
            request = Request(
                method=method,
                path=split.path,
                query=parse_query(split.query),
                content_type=self.headers.get("Content-Type"),
                body=body,
                headers=headers,
            )
            response = self.server.api.dispatch(request)
        if not isinstance(response.body, (bytes, str, dict)):
            self._stream(response)
            return
        if isinstance(response.body, bytes):
            payload = response.body
            content_type = "application/octet-stream"
        elif isinstance(response.body, str):
            payload = response.body.encode("utf-8")
            content_type = "text/plain; charset=utf-8"
        else:
            payload = json.dumps(response.body).encode("utf-8")
            content_type = "application/json"
        self.send_body(
            response.code, payload, response.content_type or content_type,
            {**_NO_CACHE, **response.headers},
        )

    def _stream(self, response: Response) -> None:
        """A watch: chunked transfer, one chunk per event line, until the stream ends,
        the server stops or the client goes away."""
        assert not isinstance(response.body, (bytes, str, dict))
        self.send_response(response.code)
        self.send_header("Content-Type", response.content_type or "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in {**_NO_CACHE, **response.headers}.items():
            self.send_header(name, value)
        self.end_headers()
        lines = response.body
        try:
            self.wfile.flush()  # the headers now: the client waits for them before any event
            for line in lines:
                if self.server.stopping:
                    break
                if not line:
                    # A watching client sends nothing: readable means it has gone away.
                    if select.select([self.connection], [], [], 0)[0]:
                        self.close_connection = True
                        return
                    continue
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            # The client went away mid-event: what is left in the buffer has no reader.
            self.close_connection = True
            self.wfile = io.BytesIO()
        finally:
            close = getattr(lines, "close", None)
            if callable(close):
                close()

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The Date header from the store's clock, as a real API server sends its own
        time: clients that take "now" from the cluster then agree with timestamps in
        the objects, simulated or not."""
        if timestamp is None:
            moment = self.server.api.store.clock()
            timestamp = moment if isinstance(moment, (int, float)) else moment.timestamp()
        return email.utils.formatdate(timestamp, usegmt=True)


class KubeApiServer:
    """A local Kubernetes API subset the official client can talk to.

    Construct, then :meth:`start` (or use :func:`sandbox.kubeapi.start_kube_api`).
    Pass ``store=`` to share objects with in-process simulators or with a
    previous server (restart on the same port), or ``state_file=`` to load
    objects at start and save them at stop.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        store: ObjectStore | None = None,
        state_file: str | os.PathLike[str] | None = None,
        clock: Clock | None = None,
        git_version: str = DEFAULT_GIT_VERSION,
        token_file: str | os.PathLike[str] | None = None,
        access_log: str | os.PathLike[str] | None = None,
        tls: bool | None = None,
        certificate: ServingCertificate | None = None,
        pod_address: PodAddress | None = None,
    ) -> None:
        if host not in LOOPBACK_HOSTS:
            raise ValueError(f"the sandbox API binds to loopback only, not {host!r}")
        self.host = "127.0.0.1" if host == "localhost" else host
        self.store = store if store is not None else ObjectStore(clock=clock)
        if store is not None and clock is not None:
            self.store.clock = clock
        self.state_file = Path(state_file) if state_file is not None else None
        # Where a pod's port listens on this machine, for services/proxy (none: every
        # proxied request fails as an unreachable endpoint does).
        self.pod_address = pod_address
        self.faults = FaultInjector()
        # HTTPS by default exactly when there are credentials to protect; a restarted
        # server passes the previous one's certificate so kubeconfigs stay valid.
        if tls is None:
            tls = token_file is not None or certificate is not None
        self.certificate = (certificate or self_signed(self.host)) if tls else None
        # The token file is read once, at construction, as kube-apiserver reads it at start.
        self.access = AccessControl(
            self.store,
            tokens=read_token_file(token_file) if token_file is not None else None,
            access_log=AccessLog(access_log) if access_log is not None else None,
        )
        self.router = ApiRouter(
            self.store,
            git_version=git_version,
            server_address=lambda: f"{self.host}:{self.port}",
            authorize=self.access.authorize,
            list_rules=self.access.rules_for,
        )
        self.request_log: collections.deque[tuple[str, str]] = collections.deque(maxlen=10_000)
        self._httpd: _HttpServer | None = None
        self._port = port

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> KubeApiServer:
        """Bind and serve in a daemon thread; loads ``state_file`` first if it exists."""
        if self._httpd is not None:
            raise RuntimeError("server already started")
        if self.state_file is not None:
            load_state(self.store, self.state_file)
        fields.load_models()
        self.router.watches.open()
        httpd = _HttpServer((self.host, self._port), self)  # a restart reuses the port
        if self.certificate is not None:
            # The handshake happens on the handler thread's first read, not in accept().
            httpd.socket = self.certificate.server_context().wrap_socket(
                httpd.socket, server_side=True, do_handshake_on_connect=False
            )
        self._port = httpd.port
        self._httpd = httpd
        httpd.serve_in_background(f"sandbox-kubeapi-{self._port}")
        log.info("sandbox Kubernetes API serving at %s", self.url)
        return self

    def stop(self) -> None:
        """Stop serving, drop open connections, save ``state_file``. Idempotent."""
        httpd = self._httpd
        if httpd is None:
            return
        self._httpd = None
        self.router.watches.close()
        httpd.close()
        if self.state_file is not None:
            save_state(self.store, self.state_file)
        log.info("sandbox Kubernetes API at %s stopped", self.url)

    @property
    def running(self) -> bool:
        return self._httpd is not None

    def __enter__(self) -> KubeApiServer:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ addresses

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        scheme = "https" if self.certificate is not None else "http"
        return f"{scheme}://{self.host}:{self._port}"

    def write_kubeconfig(
        self,
        path: str | os.PathLike[str],
        *,
        context: str = DEFAULT_CONTEXT,
        namespace: str | None = None,
        token: str = DEFAULT_TOKEN,
    ) -> Path:
        """Write a kubeconfig (one cluster, token user, current context) for this server."""
        return write_kubeconfig(
            path,
            self.url,
            context=context,
            namespace=namespace,
            token=token,
            certificate_authority=self.certificate.cert_pem if self.certificate else None,
        )

    # ------------------------------------------------------------------ requests

    def dispatch(self, request: Request) -> Response:
        """Serve one request: authenticate and authorize it, then an injected fault or the
        router; errors become Status bodies; the decision goes to the access log."""
        self.request_log.append((request.method, request.path))
        attributes = attributes_for(request.method, request.path, request.query)
        user: UserInfo | None = None
        impersonator = ""
        allowed = False
        response = Response(500, status_body(500, "InternalError", "not served"))
        try:
            user = self.access.authenticate(request.header("Authorization"))
            caller = user
            # A refused impersonation is logged as the caller's refused impersonate check.
            try:
                user = self.access.impersonate(
                    caller,
                    request.header("Impersonate-User"),
                    request.headers.get("impersonate-group", []),
                    request.header("Impersonate-Uid"),
                )
            except ImpersonationDenied as exc:
                attributes = exc.attributes
                raise
            if user is not caller:
                impersonator = caller.name
            request.user = user
            decision = self.access.authorize(user, attributes)
            if not decision.allowed:
                raise forbidden(user, attributes, decision.reason)
            allowed = True
            response = self._serve(request)
        except ApiError as exc:
            response = Response(exc.code, exc.body())
        finally:
            if self.access.access_log is not None:
                self.access.access_log.record(
                    user, attributes, allowed=allowed, code=response.code, impersonator=impersonator
                )
        return response

    def _serve(self, request: Request) -> Response:
        fault = self.faults.take(request.method, request.path)
        if fault is not None:
            code, body, headers = fault
            return Response(code, body, headers)
        try:
            proxied = proxy_path(request.path)
            if proxied is not None:
                return self._proxy(request, *proxied)
            return self.router.handle(request)
        except ApiError as exc:
            return Response(exc.code, exc.body())
        except Exception as exc:
            log.exception("sandbox API failed on %s %s", request.method, request.path)
            return Response(500, status_body(500, "InternalError", f"internal error: {exc}"))

    def _proxy(self, request: Request, namespace: str, service_id: str, path: str) -> Response:
        """``services/ID/proxy/PATH``: relayed to one endpoint (:mod:`~.serviceproxy`)."""
        upstream = locate(self.store, namespace, service_id)
        relayed = forward(upstream, self.pod_address, request.method, path,
                          urlencode(request.query, doseq=True), request.body, request.headers)
        return Response(relayed.code, relayed.body, relayed.headers,
                        content_type=relayed.content_type)
