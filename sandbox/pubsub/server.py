"""gRPC handlers for ``google.pubsub.v1.Publisher`` and ``google.pubsub.v1.Subscriber``.

Every handler is a thin adapter over ``Broker``, registered as a generic handler
(see ``rpc``); StreamingPull has a module of its own (``streaming``).
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

import grpc
from google.pubsub_v1 import types

from sandbox.pubsub import convert
from sandbox.pubsub.broker import Broker
from sandbox.pubsub.errors import InvalidArgumentError
from sandbox.pubsub.model import MAX_PULL_MESSAGES
from sandbox.pubsub.rpc import Handler, generic_handler, raw, serialize
from sandbox.pubsub.streaming import StreamingPull

_DEFAULT_PAGE_SIZE = 100
#: Pub/Sub's limit on a whole publish request (messages and framing), 10 MiB.
MAX_REQUEST_BYTES = 10 * 1024 * 1024


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
        return raw(types.ListTopicsResponse)(
            topics=[convert.topic_to_pb(t) for t in page], next_page_token=token
        )

    def list_topic_subscriptions(self, request: Any, context: Any) -> Any:
        """ListTopicSubscriptions: names only, like the real API."""
        subs = self.broker.list_topic_subscriptions(request.topic)
        page, token = _page(subs, request.page_size, request.page_token)
        return raw(types.ListTopicSubscriptionsResponse)(subscriptions=page, next_page_token=token)

    def list_topic_snapshots(self, request: Any, context: Any) -> Any:
        """ListTopicSnapshots: names only, like the real API."""
        snapshots = self.broker.list_topic_snapshots(request.topic)
        page, token = _page(snapshots, request.page_size, request.page_token)
        return raw(types.ListTopicSnapshotsResponse)(snapshots=page, next_page_token=token)

    def delete_topic(self, request: Any, context: Any) -> Any:
        """DeleteTopic: subscriptions survive, attached to ``_deleted-topic_``."""
        self.broker.delete_topic(request.topic)
        return convert.Empty()

    def publish(self, request: Any, context: Any) -> Any:
        """Publish a batch; message IDs come back in request order."""
        if request.ByteSize() > MAX_REQUEST_BYTES:
            # Pub/Sub's own words; it checks the request before any message in it.
            raise InvalidArgumentError(
                f"Request payload size exceeds the limit: {MAX_REQUEST_BYTES} bytes.")
        ids = self.broker.publish_batch(
            request.topic,
            [(m.data, dict(m.attributes), m.ordering_key) for m in request.messages],
        )
        return raw(types.PublishResponse)(message_ids=ids)

    def detach_subscription(self, request: Any, context: Any) -> Any:
        """DetachSubscription: drops the backlog and stops new deliveries."""
        self.broker.detach_subscription(request.subscription)
        return raw(types.DetachSubscriptionResponse)()

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
        return generic_handler("google.pubsub.v1.Publisher", table)


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
        return raw(types.ListSubscriptionsResponse)(
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
        return raw(types.PullResponse)(
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

    # ------------------------------------------------------ snapshots, seek
    def create_snapshot(self, request: Any, context: Any) -> Any:
        """CreateSnapshot of a subscription's unacked messages."""
        return convert.snapshot_to_pb(self.broker.create_snapshot(
            request.name, request.subscription, dict(request.labels)))

    def get_snapshot(self, request: Any, context: Any) -> Any:
        return convert.snapshot_to_pb(self.broker.get_snapshot(request.snapshot))

    def list_snapshots(self, request: Any, context: Any) -> Any:
        snapshots = self.broker.list_snapshots(request.project)
        page, token = _page(snapshots, request.page_size, request.page_token)
        return raw(types.ListSnapshotsResponse)(
            snapshots=[convert.snapshot_to_pb(s) for s in page], next_page_token=token)

    def delete_snapshot(self, request: Any, context: Any) -> Any:
        self.broker.delete_snapshot(request.snapshot)
        return convert.Empty()

    def seek(self, request: Any, context: Any) -> Any:
        """Seek to a snapshot or to a time."""
        target = request.WhichOneof("target")
        if target == "snapshot":
            self.broker.seek(request.subscription, snapshot=request.snapshot)
        elif target == "time":
            self.broker.seek(request.subscription, moment=request.time.ToDatetime(tzinfo=UTC))
        else:
            raise InvalidArgumentError("Seek needs a snapshot or a time")
        return raw(types.SeekResponse)()

    def handler(self) -> grpc.GenericRpcHandler:
        """The generic handler to register on a ``grpc.Server``."""
        table: dict[str, tuple[Handler, Any, Any]] = {
            "CreateSnapshot": (self.create_snapshot, types.CreateSnapshotRequest, types.Snapshot),
            "GetSnapshot": (self.get_snapshot, types.GetSnapshotRequest, types.Snapshot),
            "ListSnapshots": (
                self.list_snapshots, types.ListSnapshotsRequest, types.ListSnapshotsResponse),
            "DeleteSnapshot": (self.delete_snapshot, types.DeleteSnapshotRequest, None),
            "Seek": (self.seek, types.SeekRequest, types.SeekResponse),
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
            StreamingPull(self.broker),
            request_deserializer=raw(types.StreamingPullRequest).FromString,
            response_serializer=serialize,
        )
        return generic_handler("google.pubsub.v1.Subscriber", table, {"StreamingPull": streaming})
