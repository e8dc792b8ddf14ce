"""Pub/Sub publishing: the one module that imports google-cloud-pubsub.

The publisher client is created on first use and reused across invocations. It
finds a local endpoint through ``PUBSUB_EMULATOR_HOST`` on its own. ``publish``
waits for the server's acknowledgement: callers rely on a message being stored
before they let their own event be acknowledged.
"""

from __future__ import annotations

import threading
from typing import Any

from shared.errors import NotFoundError, PermanentError, RateLimitedError, UnavailableError

__all__ = ["publish", "reset_client", "topic_path"]

PUBLISH_TIMEOUT = 30.0
# Pub/Sub limits attribute values to 1024 bytes.
ATTRIBUTE_MAX_BYTES = 1024

_publisher: Any = None
_lock = threading.Lock()


def topic_path(project: str, topic: str) -> str:
    return topic if topic.startswith("projects/") else f"projects/{project}/topics/{topic}"


def _client() -> Any:
    global _publisher
    with _lock:
        if _publisher is None:
            from google.cloud import pubsub_v1  # type: ignore[attr-defined]

            # One message per call, awaited at once: batching would only add its
            # default 10 ms of latency to every invocation.
            _publisher = pubsub_v1.PublisherClient(
                batch_settings=pubsub_v1.types.BatchSettings(max_messages=1))
        return _publisher


def reset_client() -> None:
    """Forget the cached publisher (tests that switch endpoints)."""
    global _publisher
    with _lock:
        _publisher = None


def _clip(value: str) -> str:
    encoded = value.encode("utf-8")
    if len(encoded) <= ATTRIBUTE_MAX_BYTES:
        return value
    return encoded[: ATTRIBUTE_MAX_BYTES - 3].decode("utf-8", "ignore") + "..."


def publish(project: str, topic: str, data: bytes, attributes: dict[str, str] | None = None,
            ) -> str:
    """Publish one message and return its id once the server has stored it.

    Raises NotFoundError when the topic does not exist, RateLimitedError or
    UnavailableError when Pub/Sub cannot take it now.
    """
    from google.api_core import exceptions as gexc

    path = topic_path(project, topic)
    attrs = {k: _clip(v) for k, v in (attributes or {}).items()}
    try:
        future = _client().publish(path, data, **attrs)
        return str(future.result(timeout=PUBLISH_TIMEOUT))
    except gexc.NotFound as exc:
        raise NotFoundError(f"topic {path} does not exist") from exc
    except (gexc.TooManyRequests, gexc.ResourceExhausted) as exc:
        raise RateLimitedError(f"publishing to {path}: {exc}") from exc
    except gexc.InvalidArgument as exc:
        raise PermanentError(f"publishing to {path}: {exc}") from exc
    except (gexc.GoogleAPICallError, gexc.RetryError, TimeoutError, OSError) as exc:
        raise UnavailableError(f"publishing to {path}: {exc}") from exc
