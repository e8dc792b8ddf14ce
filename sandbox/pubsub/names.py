"""Resource-name parsing and validation with the real service's rules.

Code that passes the sandbox should not then fail in production because of a
name, so topic and subscription IDs follow the published constraints: 3-255
characters, start with a letter, only ``[A-Za-z0-9-._~%+]``, not starting with
``goog``.
"""

from __future__ import annotations

import re
from typing import Literal

from sandbox.pubsub.errors import InvalidArgumentError

Collection = Literal["topics", "subscriptions"]

#: Topic name a subscription reports once its topic has been deleted.
DELETED_TOPIC = "_deleted-topic_"

_PROJECT_RE = re.compile(r"[a-z0-9][a-z0-9.:\-]{0,62}")
_RESOURCE_ID_RE = re.compile(r"[A-Za-z][A-Za-z0-9\-._~%+]{2,254}")


def _check_project(project: str, original: str) -> None:
    if not _PROJECT_RE.fullmatch(project):
        raise InvalidArgumentError(f"Invalid project in resource name: (name={original})")


def project_name(name: str) -> str:
    """Validate ``projects/{project}`` and return the project ID."""
    parts = name.split("/")
    if len(parts) != 2 or parts[0] != "projects":
        raise InvalidArgumentError(f"Invalid project name: (name={name})")
    _check_project(parts[1], name)
    return parts[1]


def parse(name: str, collection: Collection) -> tuple[str, str]:
    """Split ``projects/{project}/{collection}/{id}`` into (project, id).

    Raises ``InvalidArgumentError`` with a message shaped like the real one.
    """
    parts = name.split("/")
    if len(parts) != 4 or parts[0] != "projects" or parts[2] != collection:
        raise InvalidArgumentError(f"Invalid [{collection}] name: (name={name})")
    project, resource_id = parts[1], parts[3]
    _check_project(project, name)
    if not _RESOURCE_ID_RE.fullmatch(resource_id) or resource_id.lower().startswith("goog"):
        raise InvalidArgumentError(
            f"Invalid resource name given (name={name}). Refer to "
            "https://cloud.google.com/pubsub/docs/pubsub-basics#resource_names"
            " for more information."
        )
    return project, resource_id


def topic(name: str) -> tuple[str, str]:
    """Validate a topic name; returns (project, topic_id)."""
    return parse(name, "topics")


def subscription(name: str) -> tuple[str, str]:
    """Validate a subscription name; returns (project, subscription_id)."""
    return parse(name, "subscriptions")
