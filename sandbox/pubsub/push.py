"""Push delivery: POST each message of a push subscription to its endpoint.

The body and the ack rules are those of the real push service, so a Cloud Run
function (or a functions-framework app) that works against the sandbox receives
exactly what it would receive in production:

* ``POST`` with ``Content-Type: application/json`` and the wrapped message
  (``message.{attributes,data,messageId,message_id,publishTime,publish_time}``,
  ``subscription``, and ``deliveryAttempt`` only with a dead-letter policy);
* 102/200/201/202/204 acks; any other status, a connection error or a timeout
  (the subscription's ack deadline) nacks, which the broker turns into a
  backoff (retry policy, else the push default 100 ms doubling to 60 s) and
  eventually dead-lettering.

Each push subscription gets a small pool of daemon worker threads (bounded
concurrency, 4 by default) that lease one message at a time from the broker.
Workers follow configuration changes through a broker listener and all stop on
``stop()``. Only the standard library is used for HTTP.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import threading
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from sandbox.pubsub.broker import Broker
from sandbox.pubsub.errors import NotFoundError
from sandbox.pubsub.model import Delivery, PushRecord, rfc3339

_LOG = logging.getLogger(__name__)

#: HTTP statuses the real push service treats as an acknowledgement.
ACK_STATUSES = frozenset({102, 200, 201, 202, 204})
USER_AGENT = "APIs-Google; (+https://developers.google.com/webmasters/APIs-Google.html)"
DEFAULT_CONCURRENCY = 4
# Extra lease time beyond the HTTP timeout, so a slow endpoint's lease never
# expires (and gets redelivered elsewhere) while its request is still running.
_LEASE_GRACE = 5.0
_IDLE_WAIT = 1.0


def push_body(delivery: Delivery) -> dict[str, Any]:
    """The JSON document the real service POSTs for ``delivery``."""
    message = delivery.message
    publish_time = rfc3339(message.publish_time)
    wrapped: dict[str, Any] = {
        "attributes": dict(message.attributes),
        "data": base64.b64encode(message.data).decode("ascii"),
        "messageId": message.message_id,
        "message_id": message.message_id,
        "publishTime": publish_time,
        "publish_time": publish_time,
    }
    if message.ordering_key:
        wrapped["orderingKey"] = message.ordering_key
    body: dict[str, Any] = {"message": wrapped, "subscription": delivery.subscription.name}
    if delivery.delivery_attempt:
        body["deliveryAttempt"] = delivery.delivery_attempt
    return body


def post_json(url: str, body: bytes, timeout: float) -> int:
    """POST ``body`` to ``url`` and return the HTTP status (raises ``OSError`` on failure)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(host, parts.port, timeout=timeout)
    else:
        connection = http.client.HTTPConnection(host, parts.port, timeout=timeout)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request(
            "POST",
            path,
            body=body,
            headers={
                "Content-Type": "application/json",
                "User-Agent": USER_AGENT,
                "From": "noreply@google.com",
            },
        )
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


class PushDispatcher:
    """Runs worker threads for every push subscription of a broker."""

    def __init__(self, broker: Broker, *, concurrency: int = DEFAULT_CONCURRENCY) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._broker = broker
        self._concurrency = concurrency
        self._lock = threading.Lock()
        self._groups: dict[str, tuple[threading.Event, list[threading.Thread]]] = {}
        self._retired: list[threading.Thread] = []
        self._started = False
        self._stopped = False

    def start(self) -> None:
        """Start delivering; later subscription changes are picked up automatically."""
        with self._lock:
            if self._started:
                return
            self._started = True
        self._broker.add_config_listener(self.reconcile)
        self.reconcile()

    def reconcile(self) -> None:
        """Match worker pools to the set of push subscriptions."""
        wanted = {config.name for config in self._broker.list_subscriptions() if config.is_push}
        with self._lock:
            if self._stopped:
                return
            for name in set(self._groups) - wanted:
                stop, threads = self._groups.pop(name)
                stop.set()
                self._retired.extend(threads)
            for name in wanted - set(self._groups):
                stop = threading.Event()
                threads = [
                    threading.Thread(
                        target=self._work,
                        args=(name, stop),
                        name=f"pubsub-push-{name.rsplit('/', 1)[-1]}-{index}",
                        daemon=True,
                    )
                    for index in range(self._concurrency)
                ]
                self._groups[name] = (stop, threads)
                for thread in threads:
                    thread.start()
            self._retired = [thread for thread in self._retired if thread.is_alive()]
        self._broker.wake()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop all workers and wait (bounded) for in-flight requests to finish."""
        with self._lock:
            self._stopped = True
            groups = list(self._groups.values())
            self._groups.clear()
            threads = list(self._retired)
            self._retired.clear()
        for stop, group_threads in groups:
            stop.set()
            threads.extend(group_threads)
        self._broker.wake()
        give_up = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, give_up - time.monotonic()))

    def _work(self, name: str, stop: threading.Event) -> None:
        # Only ``stop`` (set by reconcile/stop) or a closed broker end a worker:
        # a subscription that is briefly missing or pull-only (delete + recreate,
        # push -> pull -> push) just idles, so a coalesced reconcile never leaves
        # a push subscription without workers.
        broker = self._broker
        while not stop.is_set() and not broker.closed:
            try:
                config = broker.get_subscription(name)
                if not config.is_push:
                    stop.wait(_IDLE_WAIT / 10)
                    continue
                deliveries = broker.pull(
                    name,
                    1,
                    ack_deadline_seconds=config.ack_deadline_seconds + _LEASE_GRACE,
                    timeout=_IDLE_WAIT,
                    cancelled=stop.is_set,
                )
            except NotFoundError:
                stop.wait(_IDLE_WAIT / 10)
                continue
            for delivery in deliveries:
                self._deliver(delivery)

    def _deliver(self, delivery: Delivery) -> None:
        config = delivery.subscription
        body = json.dumps(push_body(delivery)).encode("utf-8")
        status: int | None = None
        error: str | None = None
        started = time.monotonic()
        try:
            status = post_json(
                config.push_config.push_endpoint, body, timeout=config.ack_deadline_seconds
            )
        except (OSError, http.client.HTTPException) as exc:
            error = f"{type(exc).__name__}: {exc}"
        latency = time.monotonic() - started
        acked = status in ACK_STATUSES
        _LOG.debug(
            "push %s message %s attempt %s -> %s",
            config.name,
            delivery.message.message_id,
            delivery.attempt,
            status if error is None else error,
        )
        # Log before settling the lease, so whoever waits for the subscription
        # to go idle sees the record of the delivery that made it idle.
        self._broker.record_push(
            PushRecord(
                subscription=config.name,
                message_id=delivery.message.message_id,
                attempt=delivery.attempt,
                status=status,
                error=error,
                latency=latency,
                acked=acked,
                at=datetime.now(UTC),
            )
        )
        try:
            if acked:
                self._broker.acknowledge(config.name, [delivery.ack_id])
            else:
                self._broker.nack(config.name, [delivery.ack_id])
        except NotFoundError:
            pass
