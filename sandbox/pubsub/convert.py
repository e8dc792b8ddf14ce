"""Conversions between Pub/Sub protobuf messages and the broker's dataclasses.

The gRPC layer works on the *raw* protobuf classes behind the proto-plus types
of ``google.pubsub_v1`` (``Type.pb()``): they give real field presence
(``HasField``), cheap (de)serialisation, and they are the very descriptors the
client library uses, so nothing is generated or registered twice. Those
classes are untyped, hence the ``Any`` annotations in this module only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import timedelta
from typing import Any

from google.protobuf import empty_pb2  # type: ignore[import-untyped,unused-ignore]
from google.pubsub_v1 import types

from sandbox.pubsub.errors import InvalidArgumentError, UnimplementedError
from sandbox.pubsub.model import (
    DeadLetterPolicy,
    Delivery,
    Message,
    PushConfig,
    RetryPolicy,
    SnapshotConfig,
    SubscriptionConfig,
    TopicConfig,
)

# Raw protobuf message classes (untyped, hence Any).
Empty: Any = empty_pb2.Empty
Topic: Any = types.Topic.pb()
Subscription: Any = types.Subscription.pb()
PubsubMessage: Any = types.PubsubMessage.pb()
ReceivedMessage: Any = types.ReceivedMessage.pb()
Snapshot: Any = types.Snapshot.pb()

#: Default retention the real service reports (7 days).
_RETENTION = timedelta(days=7)
_ACTIVE = 1  # Subscription.State.ACTIVE / Topic.State.ACTIVE


def topic_to_pb(topic: TopicConfig) -> Any:
    """Broker topic -> ``google.pubsub.v1.Topic``."""
    message = Topic(name=topic.name, labels=dict(topic.labels))
    message.state = _ACTIVE
    return message


def _seconds(duration: Any) -> float:
    return float(duration.ToTimedelta().total_seconds())


def subscription_from_pb(message: Any) -> SubscriptionConfig:
    """``google.pubsub.v1.Subscription`` -> broker config (validated later by the broker).

    Features the sandbox does not model are rejected rather than silently
    ignored, so nobody ships code that only "worked" because of the sandbox.
    """
    for unsupported in ("bigquery_config", "cloud_storage_config", "bigtable_config"):
        if message.HasField(unsupported):
            raise UnimplementedError(f"The sandbox Pub/Sub does not support {unsupported}")
    if message.enable_exactly_once_delivery:
        raise UnimplementedError("The sandbox Pub/Sub does not support exactly-once delivery")
    return SubscriptionConfig(
        name=message.name,
        topic=message.topic,
        ack_deadline_seconds=message.ack_deadline_seconds,
        push_config=push_config_from_pb(message.push_config),
        retry_policy=retry_policy_from_pb(message) if message.HasField("retry_policy") else None,
        dead_letter_policy=dead_letter_policy_from_pb(message),
        labels=dict(message.labels),
        filter=message.filter,
        enable_message_ordering=message.enable_message_ordering,
        retain_acked_messages=message.retain_acked_messages,
    )


def push_config_from_pb(message: Any) -> PushConfig:
    """``PushConfig`` -> broker push config (only wrapped payloads are supported)."""
    if message.HasField("no_wrapper"):
        raise UnimplementedError("The sandbox Pub/Sub only supports wrapped push payloads")
    return PushConfig(push_endpoint=message.push_endpoint, attributes=dict(message.attributes))


def retry_policy_from_pb(subscription: Any) -> RetryPolicy:
    """Unset backoffs become 0 here; the broker applies the 10 s / 600 s defaults."""
    policy = subscription.retry_policy
    return RetryPolicy(
        minimum_backoff=_seconds(policy.minimum_backoff),
        maximum_backoff=_seconds(policy.maximum_backoff),
    )


def dead_letter_policy_from_pb(subscription: Any) -> DeadLetterPolicy | None:
    """A policy with an empty topic means "no dead-lettering", as in the real API."""
    if not subscription.HasField("dead_letter_policy"):
        return None
    policy = subscription.dead_letter_policy
    if not policy.dead_letter_topic:
        return None
    return DeadLetterPolicy(
        dead_letter_topic=policy.dead_letter_topic,
        max_delivery_attempts=policy.max_delivery_attempts,
    )


def subscription_to_pb(config: SubscriptionConfig) -> Any:
    """Broker config -> ``google.pubsub.v1.Subscription``."""
    message = Subscription(
        name=config.name,
        topic=config.topic,
        ack_deadline_seconds=config.ack_deadline_seconds,
        labels=dict(config.labels),
        filter=config.filter,
        enable_message_ordering=config.enable_message_ordering,
        detached=config.detached,
        retain_acked_messages=config.retain_acked_messages,
    )
    message.state = _ACTIVE
    message.message_retention_duration.FromTimedelta(_RETENTION)
    message.push_config.push_endpoint = config.push_config.push_endpoint
    message.push_config.attributes.update(config.push_config.attributes)
    if config.retry_policy is not None:
        message.retry_policy.minimum_backoff.FromTimedelta(
            timedelta(seconds=config.retry_policy.minimum_backoff)
        )
        message.retry_policy.maximum_backoff.FromTimedelta(
            timedelta(seconds=config.retry_policy.maximum_backoff)
        )
    if config.dead_letter_policy is not None:
        message.dead_letter_policy.dead_letter_topic = config.dead_letter_policy.dead_letter_topic
        message.dead_letter_policy.max_delivery_attempts = (
            config.dead_letter_policy.max_delivery_attempts
        )
    return message


#: Subscription fields UpdateSubscription accepts; the others are immutable here.
_UPDATABLE = {
    "ack_deadline_seconds",
    "push_config",
    "retry_policy",
    "dead_letter_policy",
    "labels",
    "retain_acked_messages",
}
#: Accepted in an update mask but not modelled (no observable effect in a sandbox).
_IGNORED = {
    "message_retention_duration",
    "expiration_policy",
    "enable_exactly_once_delivery",
}


def subscription_changes(message: Any, paths: Iterable[str]) -> dict[str, Any]:
    """Turn UpdateSubscription's (subscription, update_mask) into broker changes."""
    fields = {path.split(".", 1)[0] for path in paths}
    if not fields:
        raise InvalidArgumentError("The update_mask must contain at least one field")
    unknown = fields - _UPDATABLE - _IGNORED
    if unknown:
        raise InvalidArgumentError(f"Invalid update_mask provided: {sorted(unknown)}")
    if "enable_exactly_once_delivery" in fields and message.enable_exactly_once_delivery:
        raise UnimplementedError("The sandbox Pub/Sub does not support exactly-once delivery")
    changes: dict[str, Any] = {}
    if "ack_deadline_seconds" in fields:
        changes["ack_deadline_seconds"] = message.ack_deadline_seconds
    if "push_config" in fields:
        changes["push_config"] = push_config_from_pb(message.push_config)
    if "retry_policy" in fields:
        changes["retry_policy"] = (
            retry_policy_from_pb(message) if message.HasField("retry_policy") else None
        )
    if "dead_letter_policy" in fields:
        changes["dead_letter_policy"] = dead_letter_policy_from_pb(message)
    if "labels" in fields:
        changes["labels"] = dict(message.labels)
    if "retain_acked_messages" in fields:
        changes["retain_acked_messages"] = message.retain_acked_messages
    return changes


def topic_labels_change(message: Any, paths: Iterable[str], current: TopicConfig) -> TopicConfig:
    """Apply UpdateTopic's mask; only labels are modelled, storage settings are ignored."""
    fields = {path.split(".", 1)[0] for path in paths}
    if not fields:
        raise InvalidArgumentError("The update_mask must contain at least one field")
    allowed = {"labels", "message_storage_policy", "message_retention_duration", "kms_key_name"}
    unknown = fields - allowed
    if unknown:
        raise InvalidArgumentError(f"Invalid update_mask provided: {sorted(unknown)}")
    if "labels" in fields:
        return replace(current, labels=dict(message.labels))
    return current


def snapshot_to_pb(snapshot: SnapshotConfig) -> Any:
    """Broker snapshot -> ``google.pubsub.v1.Snapshot``."""
    message = Snapshot(name=snapshot.name, topic=snapshot.topic, labels=dict(snapshot.labels))
    message.expire_time.FromDatetime(snapshot.expire_time)
    return message


def message_to_pb(message: Message) -> Any:
    """Broker message -> ``google.pubsub.v1.PubsubMessage``."""
    result = PubsubMessage(
        data=message.data,
        attributes=dict(message.attributes),
        message_id=message.message_id,
        ordering_key=message.ordering_key,
    )
    result.publish_time.FromDatetime(message.publish_time)
    return result


def received_message_to_pb(delivery: Delivery) -> Any:
    """Broker delivery -> ``google.pubsub.v1.ReceivedMessage``."""
    return ReceivedMessage(
        ack_id=delivery.ack_id,
        message=message_to_pb(delivery.message),
        delivery_attempt=delivery.delivery_attempt,
    )
