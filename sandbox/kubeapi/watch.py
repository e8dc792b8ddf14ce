"""``?watch=true``: a stream of the changes to a collection, as kube-apiserver sends them.

``kubectl wait`` (and any client-go informer) lists a collection, then watches it
from the list's ``resourceVersion``; the server answers ``200`` with
``Transfer-Encoding: chunked`` and one JSON event per line,
``{"type": "ADDED" | "MODIFIED" | "DELETED", "object": {...}}``, until
``timeoutSeconds`` pass (then the stream ends and the client watches again).

:class:`WatchHub` keeps the store's recent events (subscribed once, when the API
starts) so a watch from a resourceVersion replays what happened since; a
resourceVersion older than that history is answered as the watch cache answers it,
with one ``ERROR`` event carrying a 410 ``Expired`` Status (``too old resource
version``), after which clients list again. A watch without a resourceVersion (or
with ``"0"``) starts with a synthetic ``ADDED`` per existing object; with
``sendInitialEvents=true`` those are followed by the ``BOOKMARK`` whose annotation
``k8s.io/initial-events-end`` marks their end. Label and field selectors filter the
events. Not simulated: periodic bookmarks, watches of a single object's URL.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sandbox.kubeapi.errors import JsonObject, status_body
from sandbox.kubeapi.selectors import FieldSelector, LabelSelector
from sandbox.kubeapi.store import ObjectStore

__all__ = ["DEFAULT_TIMEOUT_SECONDS", "WatchHub", "WatchRequest"]

HISTORY = 2_000  # events kept for watches that start from an older list
DEFAULT_TIMEOUT_SECONDS = 1800  # kube-apiserver's --min-request-timeout
_POLL_SECONDS = 0.5  # how often an idle stream checks whether to end


@dataclass(frozen=True)
class _Event:
    rv: int
    type: str
    object: JsonObject


@dataclass(frozen=True)
class WatchRequest:
    """What one watch asks for."""

    group: str
    kind: str
    resource: str
    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    resource_version: str
    timeout_seconds: float
    send_initial_events: bool
    present: Callable[[JsonObject], JsonObject]


def _group_of(obj: JsonObject) -> str:
    api_version = str(obj.get("apiVersion") or "")
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


class WatchHub:
    """The store's recent events, and the open watches that get new ones."""

    def __init__(self, store: ObjectStore, *, history: int = HISTORY) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._history: deque[_Event] = deque(maxlen=history)
        self._oldest = int(store.resource_version)  # events after this are all kept
        self._queues: set[queue.SimpleQueue[_Event]] = set()
        self._stopped = threading.Event()
        self._unsubscribe: Callable[[], None] | None = None
        self.open()

    def open(self) -> None:
        """Record the store's events (again, after :meth:`close`)."""
        with self._lock:
            self._stopped.clear()
            if self._unsubscribe is None:
                self._oldest = max(self._oldest, int(self.store.resource_version))
                self._history.clear()
                self._unsubscribe = self.store.subscribe(self._on_event)

    def close(self) -> None:
        """Stop recording; every open stream ends at its next check."""
        with self._lock:
            self._stopped.set()
            unsubscribe, self._unsubscribe = self._unsubscribe, None
        if unsubscribe is not None:
            unsubscribe()

    def _on_event(self, event_type: str, obj: JsonObject) -> None:
        try:
            rv = int((obj.get("metadata") or {}).get("resourceVersion") or 0)
        except ValueError:
            return
        event = _Event(rv, event_type, obj)
        with self._lock:
            if len(self._history) == self._history.maxlen:
                self._oldest = self._history[0].rv
            self._history.append(event)
            for waiting in self._queues:
                waiting.put(event)

    # ------------------------------------------------------------------ streams

    def _matches(self, request: WatchRequest, obj: JsonObject) -> bool:
        meta = obj.get("metadata") or {}
        return (obj.get("kind") == request.kind and _group_of(obj) == request.group
                and (request.namespace is None or meta.get("namespace", "") == request.namespace)
                and request.labels.matches(meta.get("labels"))
                and request.fields.matches(obj))

    def stream(self, request: WatchRequest) -> Iterator[bytes]:
        """The lines of one watch response (an empty one while idle, which is not to be
        sent: the server then checks that the client is still connected). The stream
        registers for new events in the same step as it takes the history (or the list)
        it starts from, so nothing committed after ``resource_version`` is missed or
        sent twice."""

        def line(event_type: str, obj: JsonObject) -> bytes:
            return (json.dumps({"type": event_type, "object": obj}) + "\n").encode()

        waiting: queue.SimpleQueue[_Event] = queue.SimpleQueue()
        initial: list[JsonObject] = []
        replay: list[_Event] = []
        since = request.resource_version
        with self._lock:
            if since in ("", "0"):
                items, current = self.store.list_with_version(
                    request.group, request.resource, request.namespace,
                    label_selector=request.labels, field_selector=request.fields)
                initial, last = items, int(current)
            else:
                last = int(since) if since.isdigit() else 0
                if last < self._oldest:
                    oldest = self._oldest + 1
                    yield line("ERROR", status_body(
                        410, "Expired", f"too old resource version: {since} ({oldest})"))
                    return
                replay = [e for e in self._history if e.rv > last]
            self._queues.add(waiting)
        try:
            for obj in initial:
                yield line("ADDED", request.present(obj))
            if request.send_initial_events:
                yield line("BOOKMARK", {
                    "kind": request.kind, "apiVersion": "",
                    "metadata": {"resourceVersion": str(last),
                                 "annotations": {"k8s.io/initial-events-end": "true"}}})
            for event in replay:
                if event.rv > last and self._matches(request, event.object):
                    last = event.rv
                    yield line(event.type, request.present(event.object))
            deadline = time.monotonic() + request.timeout_seconds
            while not self._stopped.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                try:
                    event = waiting.get(timeout=min(_POLL_SECONDS, remaining))
                except queue.Empty:
                    yield b""  # idle: lets the server see whether the client is still there
                    continue
                if event.rv > last and self._matches(request, event.object):
                    last = event.rv
                    yield line(event.type, request.present(event.object))
        finally:
            with self._lock:
                self._queues.discard(waiting)


def timeout_of(value: str | None) -> float:
    """``timeoutSeconds`` of a watch (the server's default when absent or not positive)."""
    try:
        seconds = float(value) if value else 0.0
    except ValueError:
        seconds = 0.0
    return seconds if seconds > 0 else float(DEFAULT_TIMEOUT_SECONDS)
