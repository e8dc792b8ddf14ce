"""One client per process, per configuration: how every adapter keeps its SDK client.

Creating a Google or Kubernetes client costs imports, credential lookup and a
connection; warm invocations reuse the one made by the first. The key is whatever
the client was built from (endpoint, project, cluster): a new key (tests switching
endpoints, another cluster) gets its own client.

A build may be slow — a Kubernetes client found through GKE discovery waits for a
``get_cluster`` call — so clients are built outside the cache's lock, one build per
key at a time: threads reaching different clusters build their clients at once,
and threads wanting one cluster's client wait for the one build of it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["ClientCache"]

T = TypeVar("T")


class ClientCache(Generic[T]):
    """Lazily built, thread-safe clients remembered with the key each was built for.

    A few keys are kept (one process may talk to several clusters); past
    ``max_entries`` the least recently used client is dropped.
    """

    def __init__(self, max_entries: int = 16) -> None:
        self._lock = threading.Lock()
        self._clients: OrderedDict[Hashable, T] = OrderedDict()
        self._building: dict[Hashable, threading.Lock] = {}
        self._max = max_entries

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The client built for ``key``, else ``build()``'s (then kept). An exception
        from ``build`` reaches the caller; the next ``get`` builds again."""
        with self._lock:
            if key in self._clients:
                self._clients.move_to_end(key)
                return self._clients[key]
            building = self._building.setdefault(key, threading.Lock())
        with building:
            with self._lock:
                if key in self._clients:  # built while this thread waited
                    self._clients.move_to_end(key)
                    return self._clients[key]
            # A failed build leaves its lock in place, so the waiting threads and
            # later ones still take turns at the key.
            client = build()
            with self._lock:
                self._building.pop(key, None)
                self._clients[key] = client
                while len(self._clients) > self._max:
                    self._clients.popitem(last=False)
            return client

    def reset(self) -> None:
        """Forget every client (tests that switch endpoints)."""
        with self._lock:
            self._clients.clear()
