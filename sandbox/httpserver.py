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

__all__ = ["ApiHttpServer"]

Api = TypeVar("Api")


class ApiHttpServer(ThreadingHTTPServer, Generic[Api]):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], api: Api,
                 handler: type[BaseHTTPRequestHandler]) -> None:
        self.api = api
        self.stopping = False
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, handler)

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
