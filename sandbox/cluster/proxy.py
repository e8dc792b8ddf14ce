"""An HTTP reverse proxy for one Service port: the sandbox's kube-proxy + load balancer.

Each request (method, path, headers, body) goes to the next ready endpoint,
round-robin, over a fresh connection to its loopback host port; the response is
streamed back as it arrives (chunk by chunk, so server-sent events pass
through), re-framed with ``Transfer-Encoding: chunked`` when the upstream gave
no length. With no ready endpoint the answer is 503. A connection refused by an
endpoint (a process that just stopped) is retried on the next one, as a cloud
load balancer retries a failed connect; an error after the request was sent is
answered 502 and not retried.

Endpoints are replaced as a whole by the Service controller; a request already
forwarded keeps its connection, so in-flight requests to a pod that starts
terminating complete.
"""

from __future__ import annotations

import http.client
import logging
import threading
from collections.abc import Iterable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler

from sandbox.common.httpserver import ApiHttpServer

__all__ = ["ForwardingHandler", "ServiceProxy"]

log = logging.getLogger(__name__)

UPSTREAM_TIMEOUT = 300.0
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate",
                         "proxy-authorization", "te", "trailer", "trailers",
                         "transfer-encoding", "upgrade", "expect", "content-length"})


class _Endpoints:
    """The ready endpoints of one Service port, and whose turn it is."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._endpoints: tuple[int, ...] = ()
        self._next = 0
        self._lock = threading.Lock()

    def set_endpoints(self, ports: Sequence[int]) -> None:
        with self._lock:
            self._endpoints = tuple(ports)

    def rotation(self) -> Iterator[int]:
        """The ready endpoints, each once, starting with the next in turn."""
        with self._lock:
            endpoints = self._endpoints
            start = self._next
            self._next += 1
        for offset in range(len(endpoints)):
            yield endpoints[(start + offset) % len(endpoints)]


class ForwardingHandler(BaseHTTPRequestHandler):
    """Reads a client's request and streams an upstream's response back to it; what
    chooses the upstream is the subclass's (a Service's endpoints here, a Gateway's
    routes in :mod:`sandbox.cluster.gateways`)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # streamed chunks leave at once

    def read_body(self) -> bytes | None:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else None

    def forward_to(self, ports: Iterable[int], body: bytes | None) -> bool:
        """Send the request to the first of ``ports`` that accepts a connection and relay
        its answer (502 when it fails after the request was sent). False when none
        accepted: nothing was sent, the caller answers."""
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        if body is not None:
            headers["Content-Length"] = str(len(body))
        for port in ports:
            upstream = http.client.HTTPConnection("127.0.0.1", port, timeout=UPSTREAM_TIMEOUT)
            try:
                upstream.connect()
            except OSError:
                upstream.close()
                continue  # nothing was sent: the next endpoint may take it
            try:
                upstream.request(self.command, self.path, body=body, headers=headers)
                response = upstream.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                upstream.close()
                self.answer(502, f"upstream 127.0.0.1:{port} failed: {exc}")
                return True
            try:
                self._relay(response)
            finally:
                upstream.close()
            return True
        return False

    def _relay(self, response: http.client.HTTPResponse) -> None:
        self.send_response_only(response.status, response.reason)
        for key, value in response.getheaders():
            if key.lower() not in _HOP_BY_HOP:
                self.send_header(key, value)
        length = response.getheader("Content-Length")
        bodiless = self.command == "HEAD" or response.status in (204, 304) \
            or 100 <= response.status < 200
        chunked = False
        if bodiless:
            if length is not None:
                self.send_header("Content-Length", length)
        elif length is not None and response.getheader("Transfer-Encoding") is None:
            self.send_header("Content-Length", length)
        elif self.request_version == "HTTP/1.1":
            chunked = True
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.close_connection = True
            self.send_header("Connection", "close")
        self.end_headers()
        if bodiless:
            return
        try:
            while True:
                data = response.read1(65536)
                if not data:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                self.wfile.flush()
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        except (OSError, http.client.HTTPException):
            self.close_connection = True  # the client or the upstream went away mid-body

    def answer(self, code: int, message: str) -> None:
        """A plain-text answer of the proxy's own."""
        data = (message + "\n").encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        except OSError:
            self.close_connection = True


class _Handler(ForwardingHandler):
    server: ApiHttpServer[_Endpoints]

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s: " + format, self.server.api.name, *args)

    def _forward(self) -> None:
        body = self.read_body()
        if not self.forward_to(self.server.api.rotation(), body):
            self.answer(503, f"no ready endpoints for {self.server.api.name}")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _forward


class ServiceProxy:
    """A listening loopback port that forwards to the ready endpoints of one Service port."""

    def __init__(self, name: str) -> None:
        self._endpoints = _Endpoints(name)
        self._server = ApiHttpServer(("127.0.0.1", 0), self._endpoints, _Handler)
        self._server.serve_in_background(f"sandbox-proxy-{name}", poll_interval=0.05)

    @property
    def port(self) -> int:
        return self._server.port

    def set_endpoints(self, ports: Sequence[int]) -> None:
        """Replace the ready endpoints (host ports), in the order to rotate through."""
        self._endpoints.set_endpoints(ports)

    def close(self) -> None:
        """Stop listening and drop open client connections."""
        self._server.close()
