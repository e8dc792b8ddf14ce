"""What exists in the sandbox Pub/Sub: topics, subscriptions and snapshots.

``Resources`` is the configuration half of the broker (``broker.Broker`` adds
publishing, deliveries and seek on top): create, read, update, list and delete
with the real service's validation and errors, and listeners told of every
change (the state file and the push dispatcher follow configuration through
them). All state sits behind one re-entrant condition, which the broker's
waiters share.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from sandbox.pubsub import names
from sandbox.pubsub.backlog import Backlog
from sandbox.pubsub.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
)
from sandbox.pubsub.filters import compile_filter
from sandbox.pubsub.model import SnapshotConfig, SubscriptionConfig, TopicConfig
from sandbox.pubsub.snapshots import SnapshotStore, snapshot_name
from sandbox.pubsub.validation import as_dict, normalise


class Resources:
    """Thread-safe topics, subscriptions (with their backlogs) and snapshots."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.RLock())
        self._topics: dict[str, TopicConfig] = {}
        self._subscriptions: dict[str, Backlog] = {}
        self._snapshots = SnapshotStore()
        self._listeners: list[Callable[[], None]] = []

    # ------------------------------------------------------------- listeners
    def add_config_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (outside the lock) after any topic/subscription change."""
        with self._cond:
            self._listeners.append(listener)

    def _config_changed(self) -> None:
        with self._cond:
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    # ---------------------------------------------------------------- topics
    def create_topic(self, name: str, labels: Mapping[str, str] | None = None) -> TopicConfig:
        """Create a topic; ``AlreadyExistsError`` if it exists."""
        names.topic(name)
        with self._cond:
            if name in self._topics:
                raise AlreadyExistsError("Topic already exists")
            topic = TopicConfig(name=name, labels=as_dict(labels))
            self._topics[name] = topic
        self._config_changed()
        return topic

    def get_topic(self, name: str) -> TopicConfig:
        """Return a topic's configuration or raise ``NotFoundError``."""
        names.topic(name)
        with self._cond:
            return self._topic(name)

    def update_topic(self, name: str, *, labels: Mapping[str, str] | None = None) -> TopicConfig:
        """Replace a topic's labels (the only mutable topic setting modelled)."""
        names.topic(name)
        with self._cond:
            topic = replace(self._topic(name), labels=as_dict(labels))
            self._topics[name] = topic
        self._config_changed()
        return topic

    def list_topics(self, project: str) -> list[TopicConfig]:
        """Topics of ``projects/{project}``, sorted by name."""
        names.project_name(project)
        prefix = project + "/topics/"
        with self._cond:
            return sorted(
                (t for n, t in self._topics.items() if n.startswith(prefix)),
                key=lambda t: t.name,
            )

    def list_topic_subscriptions(self, topic: str) -> list[str]:
        """Names of the subscriptions attached to ``topic``."""
        names.topic(topic)
        with self._cond:
            self._topic(topic)
            return sorted(n for n, s in self._subscriptions.items() if s.config.topic == topic)

    def delete_topic(self, name: str) -> None:
        """Delete a topic; its subscriptions survive, attached to ``_deleted-topic_``."""
        names.topic(name)
        with self._cond:
            self._topic(name)
            del self._topics[name]
            for sub in self._subscriptions.values():
                if sub.config.topic == name:
                    sub.config = replace(sub.config, topic=names.DELETED_TOPIC)
            self._cond.notify_all()
        self._config_changed()

    def _topic(self, name: str) -> TopicConfig:
        try:
            return self._topics[name]
        except KeyError:
            raise NotFoundError(f"Topic not found: {name}") from None

    # --------------------------------------------------------- subscriptions
    def create_subscription(self, config: SubscriptionConfig) -> SubscriptionConfig:
        """Create a subscription; it only sees messages published from now on."""
        names.subscription(config.name)
        names.topic(config.topic)
        config = normalise(config)
        predicate = compile_filter(config.filter)
        with self._cond:
            if config.name in self._subscriptions:
                raise AlreadyExistsError("Subscription already exists")
            self._topic(config.topic)
            self._check_dead_letter_topic(config)
            self._subscriptions[config.name] = Backlog(config, predicate, self._topics)
            self._cond.notify_all()
        self._config_changed()
        return config

    def get_subscription(self, name: str) -> SubscriptionConfig:
        """Return a subscription's configuration or raise ``NotFoundError``."""
        names.subscription(name)
        with self._cond:
            return self._sub(name).config

    def update_subscription(self, name: str, **changes: Any) -> SubscriptionConfig:
        """Change mutable settings (push config, deadlines, policies, labels).

        ``changes`` are ``SubscriptionConfig`` field names; ``name``, ``topic``,
        ``filter`` and ``enable_message_ordering`` are immutable, as in the real API.
        """
        immutable = {"name", "topic", "filter", "enable_message_ordering", "detached"}
        bad = immutable.intersection(changes)
        if bad:
            raise InvalidArgumentError(f"Cannot update immutable field(s): {sorted(bad)}")
        names.subscription(name)
        with self._cond:
            sub = self._sub(name)
            config = normalise(replace(sub.config, **changes))
            self._check_dead_letter_topic(config)
            sub.config = config
            self._cond.notify_all()
        self._config_changed()
        return config

    def list_subscriptions(self, project: str | None = None) -> list[SubscriptionConfig]:
        """Subscriptions of ``projects/{project}`` (all when None), sorted by name."""
        prefix = ""
        if project is not None:
            names.project_name(project)
            prefix = project + "/subscriptions/"
        with self._cond:
            return sorted(
                (s.config for n, s in self._subscriptions.items() if n.startswith(prefix)),
                key=lambda c: c.name,
            )

    def delete_subscription(self, name: str) -> None:
        """Delete a subscription and drop its backlog."""
        names.subscription(name)
        with self._cond:
            self._sub(name)
            del self._subscriptions[name]
            self._cond.notify_all()
        self._config_changed()

    def detach_subscription(self, name: str) -> None:
        """Detach a subscription from its topic: backlog dropped, no new messages."""
        names.subscription(name)
        with self._cond:
            sub = self._sub(name)
            sub.config = replace(sub.config, detached=True)
            sub.clear()
            self._cond.notify_all()
        self._config_changed()

    def _sub(self, name: str) -> Backlog:
        try:
            return self._subscriptions[name]
        except KeyError:
            raise NotFoundError(f"Subscription does not exist: {name}") from None

    def _check_dead_letter_topic(self, config: SubscriptionConfig) -> None:
        policy = config.dead_letter_policy
        if policy is not None and policy.dead_letter_topic not in self._topics:
            raise NotFoundError(f"Dead letter topic not found: {policy.dead_letter_topic}")

    # ------------------------------------------------------------- snapshots
    def create_snapshot(self, name: str, subscription: str,
                        labels: Mapping[str, str] | None = None) -> SnapshotConfig:
        """Snapshot ``subscription``'s unacked messages (and its topic's later ones)."""
        snapshot_name(name)
        names.subscription(subscription)
        with self._cond:
            sub = self._sub(subscription)
            if sub.config.topic == names.DELETED_TOPIC:
                raise FailedPreconditionError("The subscription's topic has been deleted")
            return self._snapshots.create(name, sub.config.topic, sub.unacked(), labels or {})

    def get_snapshot(self, name: str) -> SnapshotConfig:
        """A snapshot's configuration or ``NotFoundError``."""
        snapshot_name(name)
        with self._cond:
            return self._snapshots.get(name).config

    def list_snapshots(self, project: str) -> list[SnapshotConfig]:
        """Snapshots of ``projects/{project}``, sorted by name."""
        names.project_name(project)
        with self._cond:
            return self._snapshots.listed(prefix=project + "/snapshots/")

    def list_topic_snapshots(self, topic: str) -> list[str]:
        """Names of the snapshots of ``topic``."""
        names.topic(topic)
        with self._cond:
            self._topic(topic)
            return [config.name for config in self._snapshots.listed(topic=topic)]

    def delete_snapshot(self, name: str) -> None:
        snapshot_name(name)
        with self._cond:
            self._snapshots.delete(name)

    def topics(self) -> list[TopicConfig]:
        """Every topic, sorted by name (for the state file)."""
        with self._cond:
            return sorted(self._topics.values(), key=lambda t: t.name)
