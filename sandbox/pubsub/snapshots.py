"""Snapshots: a subscription's unacked messages, kept for a later seek.

As in the real service, a snapshot holds the messages its subscription had not
acknowledged when it was taken plus every message published to the topic since,
and expires after 7 days; seeking a subscription of the same topic to it makes
exactly those messages unacked. Snapshots live in memory only, like messages.

The store takes no lock: the broker calls it under its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sandbox.pubsub import names
from sandbox.pubsub.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError
from sandbox.pubsub.model import RETENTION_SECONDS, Message, SnapshotConfig


@dataclass
class Snapshot:
    config: SnapshotConfig
    messages: dict[str, Message] = field(default_factory=dict)


def snapshot_name(name: str) -> tuple[str, str]:
    """Validate ``projects/{project}/snapshots/{id}``; returns (project, snapshot_id)."""
    parts = name.split("/")
    if len(parts) != 4 or parts[0] != "projects" or parts[2] != "snapshots":
        raise InvalidArgumentError(f"Invalid [snapshots] name: (name={name})")
    names.project_name("/".join(parts[:2]))
    # Snapshot ids follow the topic and subscription rules.
    names.topic(f"projects/{parts[1]}/topics/{parts[3]}")
    return parts[1], parts[3]


class SnapshotStore:
    """The broker's snapshots by name."""

    def __init__(self) -> None:
        self._snapshots: dict[str, Snapshot] = {}

    def create(self, name: str, topic: str, unacked: Iterable[Message],
               labels: Mapping[str, str]) -> SnapshotConfig:
        """Raises AlreadyExistsError when the name is taken."""
        self._drop_expired()
        if name in self._snapshots:
            raise AlreadyExistsError("Snapshot already exists")
        config = SnapshotConfig(
            name=name, topic=topic, labels=dict(labels),
            expire_time=datetime.now(UTC) + timedelta(seconds=RETENTION_SECONDS))
        self._snapshots[name] = Snapshot(config, {m.message_id: m for m in unacked})
        return config

    def get(self, name: str) -> Snapshot:
        """Raises NotFoundError."""
        self._drop_expired()
        try:
            return self._snapshots[name]
        except KeyError:
            raise NotFoundError("Snapshot does not exist") from None

    def delete(self, name: str) -> None:
        self.get(name)
        del self._snapshots[name]

    def listed(self, prefix: str = "", topic: str | None = None) -> list[SnapshotConfig]:
        """Snapshots whose name starts with ``prefix`` (and of ``topic``), by name."""
        self._drop_expired()
        return sorted((s.config for n, s in self._snapshots.items()
                       if n.startswith(prefix) and topic in (None, s.config.topic)),
                      key=lambda config: config.name)

    def record(self, topic: str, message: Message) -> None:
        """Keep a message published to ``topic`` in every snapshot of that topic."""
        for snapshot in self._snapshots.values():
            if snapshot.config.topic == topic:
                snapshot.messages[message.message_id] = message

    def _drop_expired(self) -> None:
        now = datetime.now(UTC)
        for name in [n for n, s in self._snapshots.items() if s.config.expire_time <= now]:
            del self._snapshots[name]
