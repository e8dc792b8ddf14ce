"""Optional persistence of topics and subscriptions to a JSON state file.

Only configuration is persisted (messages are not): restarting the sandbox
keeps the resources a developer created by hand or with Terraform-like setup
scripts, which is what makes a restart cheap. Writes are atomic (temp file +
rename) and happen after every configuration change.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sandbox.pubsub import names
from sandbox.pubsub.broker import Broker
from sandbox.pubsub.errors import AlreadyExistsError, NotFoundError
from sandbox.pubsub.model import (
    DEFAULT_ACK_DEADLINE,
    DeadLetterPolicy,
    PushConfig,
    RetryPolicy,
    SubscriptionConfig,
    TopicConfig,
)

_LOG = logging.getLogger(__name__)


class StateFile:
    """Loads a broker's configuration from a file and saves it on every change."""

    def __init__(self, path: str | os.PathLike[str], broker: Broker) -> None:
        self.path = Path(path)
        self._broker = broker
        self._lock = threading.Lock()

    def load(self) -> None:
        """Recreate the saved topics and subscriptions (a missing file is an empty state)."""
        if not self.path.exists():
            return
        data = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        import_config(self._broker, data)

    def attach(self) -> None:
        """Save now and after every subsequent configuration change."""
        self._broker.add_config_listener(self.save)
        self.save()

    def save(self) -> None:
        """Atomically write the current configuration."""
        with self._lock:
            data = export_config(self._broker)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".pubsub-state-", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(data, handle, indent=2, sort_keys=True)
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            _LOG.debug("saved Pub/Sub state to %s", self.path)


def export_config(broker: Broker) -> dict[str, Any]:
    """Topics and subscriptions as JSON-ready data (messages are not included)."""
    return {
        "topics": [_topic_to_dict(t) for t in broker.topics()],
        "subscriptions": [_subscription_to_dict(s) for s in broker.list_subscriptions()],
    }


def import_config(broker: Broker, data: Mapping[str, Any]) -> None:
    """Recreate topics and subscriptions from ``export_config`` output (skips existing)."""
    for raw_topic in data.get("topics", []):
        with contextlib.suppress(AlreadyExistsError):
            broker.create_topic(raw_topic["name"], raw_topic.get("labels"))
    for raw_sub in data.get("subscriptions", []):
        config = _subscription_from_dict(raw_sub)
        if config.topic == names.DELETED_TOPIC:
            continue
        # A subscription whose (dead-letter) topic is gone is skipped, not fatal.
        with contextlib.suppress(AlreadyExistsError, NotFoundError):
            broker.create_subscription(config)


def _topic_to_dict(topic: TopicConfig) -> dict[str, Any]:
    return {"name": topic.name, "labels": dict(topic.labels)}


def _subscription_to_dict(config: SubscriptionConfig) -> dict[str, Any]:
    return {
        "name": config.name,
        "topic": config.topic,
        "ack_deadline_seconds": config.ack_deadline_seconds,
        "push_endpoint": config.push_config.push_endpoint,
        "push_attributes": dict(config.push_config.attributes),
        "retry_policy": None
        if config.retry_policy is None
        else {
            "minimum_backoff": config.retry_policy.minimum_backoff,
            "maximum_backoff": config.retry_policy.maximum_backoff,
        },
        "dead_letter_policy": None
        if config.dead_letter_policy is None
        else {
            "dead_letter_topic": config.dead_letter_policy.dead_letter_topic,
            "max_delivery_attempts": config.dead_letter_policy.max_delivery_attempts,
        },
        "labels": dict(config.labels),
        "filter": config.filter,
        "enable_message_ordering": config.enable_message_ordering,
        "retain_acked_messages": config.retain_acked_messages,
    }


def _subscription_from_dict(raw: Mapping[str, Any]) -> SubscriptionConfig:
    retry = raw.get("retry_policy")
    dead_letter = raw.get("dead_letter_policy")
    return SubscriptionConfig(
        name=raw["name"],
        topic=raw["topic"],
        ack_deadline_seconds=int(raw.get("ack_deadline_seconds", DEFAULT_ACK_DEADLINE)),
        push_config=PushConfig(
            push_endpoint=raw.get("push_endpoint", ""),
            attributes=dict(raw.get("push_attributes", {})),
        ),
        retry_policy=None
        if not retry
        else RetryPolicy(float(retry["minimum_backoff"]), float(retry["maximum_backoff"])),
        dead_letter_policy=None
        if not dead_letter
        else DeadLetterPolicy(
            dead_letter["dead_letter_topic"], int(dead_letter["max_delivery_attempts"])
        ),
        labels=dict(raw.get("labels", {})),
        filter=raw.get("filter", ""),
        enable_message_ordering=bool(raw.get("enable_message_ordering", False)),
        retain_acked_messages=bool(raw.get("retain_acked_messages", False)),
    )
