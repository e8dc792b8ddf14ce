"""StreamingPull, what ``SubscriberClient.subscribe()`` uses.

The first request names the subscription and the stream ack deadline; later
requests (read on a separate thread) carry acks, modacks and heartbeats, while
the handler's thread streams ``StreamingPullResponse`` batches as messages become
available, honouring the client's ``max_outstanding_messages`` flow control. The
stream ends when the client cancels it, the subscription is deleted (NOT_FOUND)
or the server stops.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import grpc
from google.pubsub_v1 import types

from sandbox.pubsub import convert, names
from sandbox.pubsub.broker import Broker
from sandbox.pubsub.errors import InvalidArgumentError, PubSubError
from sandbox.pubsub.model import MAX_ACK_DEADLINE, MIN_ACK_DEADLINE
from sandbox.pubsub.rpc import abort, raw

_LOG = logging.getLogger(__name__)

# How long a streaming pull sleeps between checks that its client is still there.
_STREAM_SLICE = 0.5
_STREAM_BATCH = 100


class _Stream:
    """Per-StreamingPull state shared by the response loop and the request reader."""

    def __init__(self, subscription: str, deadline: int, max_outstanding: int) -> None:
        self.subscription = subscription
        self.deadline = deadline
        self.max_outstanding = max_outstanding
        self.outstanding: set[str] = set()
        self.done = threading.Event()
        self.error: PubSubError | None = None
        self.ordering = False
        self.lock = threading.Lock()


class StreamingPull:
    """The StreamingPull method over a broker."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def __call__(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:
        """Serve one stream: see the module docstring."""
        try:
            first = next(requests)
        except (StopIteration, grpc.RpcError):
            return
        try:
            stream = self._open_stream(first)
            self._apply(stream, first)
        except PubSubError as error:
            abort(context, error)
            return

        def on_done() -> None:
            stream.done.set()
            self.broker.wake()

        context.add_callback(on_done)
        reader = threading.Thread(
            target=self._read_requests,
            args=(stream, requests),
            name=f"pubsub-stream-{stream.subscription.rsplit('/', 1)[-1]}",
            daemon=True,
        )
        reader.start()
        properties = raw(types.StreamingPullResponse.SubscriptionProperties)(
            exactly_once_delivery_enabled=False,
            message_ordering_enabled=stream.ordering,
        )
        try:
            while not stream.done.is_set() and not self.broker.closed and context.is_active():
                limit = self._room(stream)
                if limit <= 0:
                    self.broker.wait_until(
                        lambda: stream.done.is_set() or self._room(stream) > 0, _STREAM_SLICE
                    )
                    continue
                with stream.lock:
                    deadline = stream.deadline
                deliveries = self.broker.pull(
                    stream.subscription,
                    limit,
                    ack_deadline_seconds=deadline,
                    timeout=_STREAM_SLICE,
                    cancelled=stream.done.is_set,
                )
                if not deliveries:
                    continue
                with stream.lock:
                    stream.outstanding.update(d.ack_id for d in deliveries)
                yield raw(types.StreamingPullResponse)(
                    received_messages=[convert.received_message_to_pb(d) for d in deliveries],
                    subscription_properties=properties,
                )
        except PubSubError as error:
            stream.error = error
        finally:
            stream.done.set()
        if stream.error is not None and context.is_active():
            abort(context, stream.error)

    def _open_stream(self, first: Any) -> _Stream:
        if not first.subscription:
            raise InvalidArgumentError("The first StreamingPullRequest must name a subscription")
        names.subscription(first.subscription)
        config = self.broker.get_subscription(first.subscription)
        deadline = first.stream_ack_deadline_seconds
        if not MIN_ACK_DEADLINE <= deadline <= MAX_ACK_DEADLINE:
            raise InvalidArgumentError(
                f"Invalid stream_ack_deadline_seconds({deadline}). "
                f"Must be between {MIN_ACK_DEADLINE} and {MAX_ACK_DEADLINE}."
            )
        stream = _Stream(first.subscription, deadline, first.max_outstanding_messages)
        stream.ordering = config.enable_message_ordering
        return stream

    def _room(self, stream: _Stream) -> int:
        """How many more messages the client's flow control admits right now."""
        if stream.max_outstanding <= 0:
            return _STREAM_BATCH
        with stream.lock:
            ack_ids = set(stream.outstanding)
        still = self.broker.leased(stream.subscription, ack_ids)
        with stream.lock:
            stream.outstanding.intersection_update(still | (stream.outstanding - ack_ids))
            return min(_STREAM_BATCH, stream.max_outstanding - len(stream.outstanding))

    def _read_requests(self, stream: _Stream, requests: Iterator[Any]) -> None:
        try:
            for request in requests:
                if stream.done.is_set():
                    break
                self._apply(stream, request)
        except PubSubError as error:
            stream.error = error
        except grpc.RpcError:
            pass  # the client went away; on_done handles the rest
        except Exception:
            _LOG.exception("StreamingPull reader for %s failed", stream.subscription)
        finally:
            stream.done.set()
            self.broker.wake()

    def _apply(self, stream: _Stream, request: Any) -> None:
        """Apply one request's acks, modacks and stream deadline change."""
        if request.stream_ack_deadline_seconds:
            with stream.lock:
                stream.deadline = request.stream_ack_deadline_seconds
        if request.ack_ids:
            self.broker.acknowledge(stream.subscription, list(request.ack_ids))
        if len(request.modify_deadline_ack_ids) != len(request.modify_deadline_seconds):
            raise InvalidArgumentError(
                "modify_deadline_ack_ids and modify_deadline_seconds must have the same length"
            )
        by_seconds: defaultdict[int, list[str]] = defaultdict(list)
        for ack_id, seconds in zip(
            request.modify_deadline_ack_ids, request.modify_deadline_seconds, strict=True
        ):
            by_seconds[seconds].append(ack_id)
        for seconds, ack_ids in by_seconds.items():
            self.broker.modify_ack_deadline(stream.subscription, ack_ids, seconds)
