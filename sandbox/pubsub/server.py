"""gRPC handlers for ``google.pubsub.v1.Publisher`` and ``google.pubsub.v1.Subscriber``.

google-cloud-pubsub ships no servicer base classes, and code generated from
pubsub.proto clashes with the library's descriptors, so the services are
registered as generic handlers whose (de)serialisers are the library's own raw
protobuf classes. Every handler is a thin adapter over ``Broker``; broker
errors become gRPC status codes so the real client raises ``AlreadyExists``,
``NotFound``, ``InvalidArgument``...

StreamingPull is what ``SubscriberClient.subscribe()`` uses: the first request
names the subscription and the stream ack deadline; later requests (read on a
separate thread) carry acks, modacks and heartbeats, while this handler's
thread streams ``StreamingPullResponse`` batches as messages become available,
honouring the client's ``max_outstanding_messages`` flow control. The stream
ends when the client cancels it, the subscription is deleted (NOT_FOUND) or
the server stops.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from google.pubsub_v1 import types

from sandbox.pubsub import convert, names
from sandbox.pubsub.broker import MAX_ACK_DEADLINE, MAX_PULL_MESSAGES, MIN_ACK_DEADLINE, Broker
from sandbox.pubsub.errors import InvalidArgumentError, PubSubError

_LOG = logging.getLogger(__name__)

Handler = Callable[[Any, Any], Any]

# How long a streaming pull sleeps between checks that its client is still there.
_STREAM_SLICE = 0.5
_STREAM_BATCH = 100
_DEFAULT_PAGE_SIZE = 100


def _abort(context: Any, error: PubSubError) -> None:
    context.abort(getattr(grpc.StatusCode, error.grpc_code_name), str(error))


def _map_errors(method: Handler) -> Handler:
    """Map broker errors raised by a unary handler to gRPC status codes."""

    @functools.wraps(method)
    def wrapper(request: Any, context: Any) -> Any:
        try:
            return method(request, context)
        except PubSubError as error:
            _abort(context, error)
            raise AssertionError("unreachable: context.abort raises") from error

    return wrapper


def _page(items: list[Any], page_size: int, page_token: str) -> tuple[list[Any], str]:
    """Offset pagination with opaque-looking tokens."""
    try:
        start = int(page_token) if page_token else 0
    except ValueError:
        raise InvalidArgumentError(f"Invalid page token: {page_token}") from None
    if start < 0:
        raise InvalidArgumentError(f"Invalid page token: {page_token}")
    size = page_size if page_size > 0 else _DEFAULT_PAGE_SIZE
    end = start + size
    return items[start:end], (str(end) if end < len(items) else "")


def _raw(proto_plus_type: Any) -> Any:
    return proto_plus_type.pb()


def _serialize(message: Any) -> bytes:
    return bytes(message.SerializeToString())


class PublisherService:
    """``google.pubsub.v1.Publisher`` over a broker."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def create_topic(self, request: Any, context: Any) -> Any:
        """CreateTopic: the request *is* the Topic."""
        return convert.topic_to_pb(self.broker.create_topic(request.name, dict(request.labels)))

    def update_topic(self, request: Any, context: Any) -> Any:
        """UpdateTopic: only labels are modelled."""
        current = self.broker.get_topic(request.topic.name)
        updated = convert.topic_labels_change(request.topic, request.update_mask.paths, current)
        return convert.topic_to_pb(self.broker.update_topic(updated.name, labels=updated.labels))

    def get_topic(self, request: Any, context: Any) -> Any:
        """GetTopic."""
        return convert.topic_to_pb(self.broker.get_topic(request.topic))

    def list_topics(self, request: Any, context: Any) -> Any:
        """ListTopics with page_size / page_token."""
        topics = self.broker.list_topics(request.project)
        page, token = _page(topics, request.page_size, request.page_token)
        return _raw(types.ListTopicsResponse)(
            topics=[convert.topic_to_pb(t) for t in page], next_page_token=token
        )

    def list_topic_subscriptions(self, request: Any, context: Any) -> Any:
        """ListTopicSubscriptions: names only, like the real API."""
        subs = self.broker.list_topic_subscriptions(request.topic)
        page, token = _page(subs, request.page_size, request.page_token)
        return _raw(types.ListTopicSubscriptionsResponse)(subscriptions=page, next_page_token=token)

    def list_topic_snapshots(self, request: Any, context: Any) -> Any:
        """ListTopicSnapshots: snapshots are not modelled, so always empty."""
        self.broker.get_topic(request.topic)
        return _raw(types.ListTopicSnapshotsResponse)()

    def delete_topic(self, request: Any, context: Any) -> Any:
        """DeleteTopic: subscriptions survive, attached to ``_deleted-topic_``."""
        self.broker.delete_topic(request.topic)
        return convert.Empty()

    def publish(self, request: Any, context: Any) -> Any:
        """Publish a batch; message IDs come back in request order."""
        ids = self.broker.publish_batch(
            request.topic,
            [(m.data, dict(m.attributes), m.ordering_key) for m in request.messages],
        )
        return _raw(types.PublishResponse)(message_ids=ids)

    def detach_subscription(self, request: Any, context: Any) -> Any:
        """DetachSubscription: drops the backlog and stops new deliveries."""
        self.broker.detach_subscription(request.subscription)
        return _raw(types.DetachSubscriptionResponse)()

    def handler(self) -> grpc.GenericRpcHandler:
        """The generic handler to register on a ``grpc.Server``."""
        table: dict[str, tuple[Handler, Any, Any]] = {
            "CreateTopic": (self.create_topic, types.Topic, types.Topic),
            "UpdateTopic": (self.update_topic, types.UpdateTopicRequest, types.Topic),
            "Publish": (self.publish, types.PublishRequest, types.PublishResponse),
            "GetTopic": (self.get_topic, types.GetTopicRequest, types.Topic),
            "ListTopics": (self.list_topics, types.ListTopicsRequest, types.ListTopicsResponse),
            "ListTopicSubscriptions": (
                self.list_topic_subscriptions,
                types.ListTopicSubscriptionsRequest,
                types.ListTopicSubscriptionsResponse,
            ),
            "ListTopicSnapshots": (
                self.list_topic_snapshots,
                types.ListTopicSnapshotsRequest,
                types.ListTopicSnapshotsResponse,
            ),
            "DeleteTopic": (self.delete_topic, types.DeleteTopicRequest, None),
            "DetachSubscription": (
                self.detach_subscription,
                types.DetachSubscriptionRequest,
                types.DetachSubscriptionResponse,
            ),
        }
        return _generic_handler("google.pubsub.v1.Publisher", table)


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


class SubscriberService:
    """``google.pubsub.v1.Subscriber`` over a broker."""

    def __init__(self, broker: Broker, *, pull_wait_seconds: float = 5.0) -> None:
        self.broker = broker
        self.pull_wait_seconds = pull_wait_seconds

    def create_subscription(self, request: Any, context: Any) -> Any:
        """CreateSubscription: the request *is* the Subscription."""
        config = self.broker.create_subscription(convert.subscription_from_pb(request))
        return convert.subscription_to_pb(config)

    def get_subscription(self, request: Any, context: Any) -> Any:
        """GetSubscription."""
        return convert.subscription_to_pb(self.broker.get_subscription(request.subscription))

    def update_subscription(self, request: Any, context: Any) -> Any:
        """UpdateSubscription: push config, ack deadline, retry/dead-letter policy, labels."""
        changes = convert.subscription_changes(request.subscription, request.update_mask.paths)
        config = self.broker.update_subscription(request.subscription.name, **changes)
        return convert.subscription_to_pb(config)

    def list_subscriptions(self, request: Any, context: Any) -> Any:
        """ListSubscriptions with page_size / page_token."""
        subs = self.broker.list_subscriptions(request.project)
        page, token = _page(subs, request.page_size, request.page_token)
        return _raw(types.ListSubscriptionsResponse)(
            subscriptions=[convert.subscription_to_pb(s) for s in page], next_page_token=token
        )

    def delete_subscription(self, request: Any, context: Any) -> Any:
        """DeleteSubscription (open streams on it end with NOT_FOUND)."""
        self.broker.delete_subscription(request.subscription)
        return convert.Empty()

    def modify_push_config(self, request: Any, context: Any) -> Any:
        """ModifyPushConfig: an empty endpoint turns the subscription into a pull one."""
        self.broker.update_subscription(
            request.subscription, push_config=convert.push_config_from_pb(request.push_config)
        )
        return convert.Empty()

    def pull(self, request: Any, context: Any) -> Any:
        """Pull: waits (bounded) for at least one message unless return_immediately."""
        if request.max_messages <= 0:
            raise InvalidArgumentError("max_messages must be greater than 0")
        wait = 0.0 if request.return_immediately else self.pull_wait_seconds
        remaining = context.time_remaining()
        if remaining is not None:
            wait = max(0.0, min(wait, remaining - 0.2))
        deliveries = self.broker.pull(
            request.subscription,
            min(request.max_messages, MAX_PULL_MESSAGES),
            timeout=wait,
            cancelled=lambda: not context.is_active(),
        )
        return _raw(types.PullResponse)(
            received_messages=[convert.received_message_to_pb(d) for d in deliveries]
        )

    def acknowledge(self, request: Any, context: Any) -> Any:
        """Acknowledge; unknown or expired ack IDs are ignored."""
        if not request.ack_ids:
            raise InvalidArgumentError("ack_ids must not be empty")
        self.broker.acknowledge(request.subscription, list(request.ack_ids))
        return convert.Empty()

    def modify_ack_deadline(self, request: Any, context: Any) -> Any:
        """ModifyAckDeadline; 0 seconds is a nack."""
        if not request.ack_ids:
            raise InvalidArgumentError("ack_ids must not be empty")
        self.broker.modify_ack_deadline(
            request.subscription, list(request.ack_ids), request.ack_deadline_seconds
        )
        return convert.Empty()

    # ------------------------------------------------------------ streaming
    def streaming_pull(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:
        """StreamingPull: see the module docstring."""
        try:
            first = next(requests)
        except (StopIteration, grpc.RpcError):
            return
        try:
            stream = self._open_stream(first)
            self._apply(stream, first)
        except PubSubError as error:
            _abort(context, error)
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
        properties = _raw(types.StreamingPullResponse.SubscriptionProperties)(
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
                yield _raw(types.StreamingPullResponse)(
                    received_messages=[convert.received_message_to_pb(d) for d in deliveries],
                    subscription_properties=properties,
                )
        except PubSubError as error:
            stream.error = error
        finally:
            stream.done.set()
        if stream.error is not None and context.is_active():
            _abort(context, stream.error)

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

    def handler(self) -> grpc.GenericRpcHandler:
        """The generic handler to register on a ``grpc.Server``."""
        table: dict[str, tuple[Handler, Any, Any]] = {
            "CreateSubscription": (
                self.create_subscription,
                types.Subscription,
                types.Subscription,
            ),
            "GetSubscription": (
                self.get_subscription,
                types.GetSubscriptionRequest,
                types.Subscription,
            ),
            "UpdateSubscription": (
                self.update_subscription,
                types.UpdateSubscriptionRequest,
                types.Subscription,
            ),
            "ListSubscriptions": (
                self.list_subscriptions,
                types.ListSubscriptionsRequest,
                types.ListSubscriptionsResponse,
            ),
            "DeleteSubscription": (self.delete_subscription, types.DeleteSubscriptionRequest, None),
            "ModifyAckDeadline": (self.modify_ack_deadline, types.ModifyAckDeadlineRequest, None),
            "Acknowledge": (self.acknowledge, types.AcknowledgeRequest, None),
            "Pull": (self.pull, types.PullRequest, types.PullResponse),
            "ModifyPushConfig": (self.modify_push_config, types.ModifyPushConfigRequest, None),
        }
        streaming = grpc.stream_stream_rpc_method_handler(
            self.streaming_pull,
            request_deserializer=_raw(types.StreamingPullRequest).FromString,
            response_serializer=_serialize,
        )
        return _generic_handler("google.pubsub.v1.Subscriber", table, {"StreamingPull": streaming})


def _generic_handler(
    service: str,
    table: dict[str, tuple[Handler, Any, Any]],
    extra: dict[str, Any] | None = None,
) -> grpc.GenericRpcHandler:
    """Build unary handlers from (function, request type, response type) rows.

    A response type of None means ``google.protobuf.Empty``; the serializer
    does not care, the entry only documents the method.
    """
    handlers: dict[str, Any] = dict(extra or {})
    for method, (function, request_type, _response_type) in table.items():
        handlers[method] = grpc.unary_unary_rpc_method_handler(
            _map_errors(function),
            request_deserializer=_raw(request_type).FromString,
            response_serializer=_serialize,
        )
    return grpc.method_handlers_generic_handler(service, handlers)
