"""The sandbox Pub/Sub: a local endpoint the real google-cloud-pubsub client uses.

Start one with ``start_pubsub()`` and point clients at it with
``PUBSUB_EMULATOR_HOST=server.address``; the in-process ``server.broker``
exposes counters, the push log and ``wait_idle`` for tests and demos. No
emulator, Docker or network access is needed.
"""

from __future__ import annotations

from sandbox.pubsub.broker import Broker
from sandbox.pubsub.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    PubSubError,
    UnimplementedError,
)
from sandbox.pubsub.model import (
    DeadLetterPolicy,
    Delivery,
    Message,
    PushConfig,
    PushRecord,
    RetryPolicy,
    SnapshotConfig,
    SubscriptionConfig,
    SubscriptionStats,
    TopicConfig,
)
from sandbox.pubsub.push import PushDispatcher, push_body
from sandbox.pubsub.runtime import PubSubServer, start_pubsub

__all__ = [
    "AlreadyExistsError",
    "Broker",
    "DeadLetterPolicy",
    "Delivery",
    "FailedPreconditionError",
    "InvalidArgumentError",
    "Message",
    "NotFoundError",
    "PubSubError",
    "PubSubServer",
    "PushConfig",
    "PushDispatcher",
    "PushRecord",
    "RetryPolicy",
    "SnapshotConfig",
    "SubscriptionConfig",
    "SubscriptionStats",
    "TopicConfig",
    "UnimplementedError",
    "push_body",
    "start_pubsub",
]
