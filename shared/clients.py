"""One client per process, per configuration: how every adapter keeps its SDK client.

Creating a Google or Kubernetes client costs imports, credential lookup and a
connection; warm invocations reuse the one made by the first. The key is whatever
the client was built from (endpoint, project, cluster): when it changes (tests
switching endpoints, a different cluster) the client is built again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["ClientCache"]

T = TypeVar("T")


class ClientCache(Generic[T]):
    """A lazily built, thread-safe client remembered with the key it was built for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._client: T | None = None
        self._key: Hashable = None

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The cached client if it was built for ``key``, else ``build()``'s."""
        with self._lock:
            if self._client is None or self._key != key:
                self._client = build()
                self._key = key
            return self._client

    def reset(self) -> None:
        """Forget the client (tests that switch endpoints)."""
        with self._lock:
            self._client, self._key = None, None
