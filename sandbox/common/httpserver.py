"""The HTTP server the REST stand-ins share.

A ThreadingHTTPServer that keeps a reference to the API object it serves and
tracks open connections, so ``stop()`` can really take the endpoint down:
kept-alive client connections are shut too, the way a restarted apiserver drops
them (tests of "the API is down" depend on it).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, TypeVar

# Chosen from a range of its own and reserved across processes: see sandbox.common.ports.
from sandbox.common.ports import free_port

__all__ = ["ApiHttpServer", "ApiRequestHandler", "free_port", "port_open"]

Api = TypeVar("Api")


def port_open(port: int, timeout: float = 0.2) -> bool:
    """Whether something accepts TCP connections on the loopback port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class ApiHttpServer(ThreadingHTTPServer, Generic[Api]):
    daemon_threads = True
    allow_reuse_address = True
    # The listen backlog. socketserver's default of 5 is too small for a burst of
    # new connections (a client fanning out over threads, a benchmark's sweep):
    # Linux drops the SYNs beyond it and each of those clients retries a whole
    # second later, which looks like a slow server.
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], api: Api,
                 handler: type[BaseHTTPRequestHandler]) -> None:
        self.api = api
        self.stopping = False
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        super().__init__(address, handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def serve_in_background(self, name: str, poll_interval: float = 0.01) -> None:
        """Serve on a daemon thread (a short poll interval keeps stop() prompt)."""
        self._thread = threading.Thread(target=self.serve_forever,
                                        kwargs={"poll_interval": poll_interval},
                                        name=name, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving, shut kept-alive connections, release the port, join the thread."""
        self.stopping = True
        self.shutdown()
        self.drop_connections()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class ApiRequestHandler(BaseHTTPRequestHandler):
    """What the stand-ins' request handlers share: HTTP/1.1 keep-alive, and responses
    that tell the client to close while the server is stopping."""

    protocol_version = "HTTP/1.1"
    # Headers and body leave in one segment, without Nagle: otherwise every
    # keep-alive request stalls ~40 ms on the client's delayed ACK.
    disable_nagle_algorithm = True
    wbufsize = 64 * 1024
    server: ApiHttpServer[Any]

    def send_body(self, code: int, payload: bytes, content_type: str,
                  headers: Mapping[str, str] | None = None) -> None:
        """Send one complete response."""
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.server.stopping or self.close_connection:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        # Access lines are debug output of the module that defines the handler.
        logging.getLogger(type(self).__module__).debug(
            "%s " + format, self.address_string(), *args)
