"""The HTTP server the REST stand-ins share.

A ThreadingHTTPServer that keeps a reference to the API object it serves and
tracks open connections, so ``stop()`` can really take the endpoint down:
kept-alive client connections are shut too, the way a restarted apiserver drops
them (tests of "the API is down" depend on it).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, TypeVar

__all__ = ["ApiHttpServer", "free_port", "port_open"]

Api = TypeVar("Api")


def free_port() -> int:
    """A loopback TCP port nothing listens on right now (for a server to bind next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int, timeout: float = 0.2) -> bool:
    """Whether something accepts TCP connections on the loopback port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class ApiHttpServer(ThreadingHTTPServer, Generic[Api]):
    daemon_threads = True
    allow_reuse_address = True

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
