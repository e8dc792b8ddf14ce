"""Pub/Sub publishing: the one module that imports google-cloud-pubsub.

The publisher client is created on first use and reused across invocations. It
finds a local endpoint through ``PUBSUB_EMULATOR_HOST`` on its own. ``publish``
waits for the server's acknowledgement: callers rely on a message being stored
before they let their own event be acknowledged.

The client's own retries are bounded by the same timeout the caller waits for: the
library's default keeps retrying a publish for ten minutes in the background, so a
caller that gave up and published again could store the message twice.
"""

from __future__ import annotations

import os
from typing import Any

from shared.clients import ClientCache
from shared.errors import (
    ConfigError,
    MissingTargetError,
    PermanentError,
    PermissionDeniedError,
    RateLimitedError,
    UnavailableError,
)
from shared.safetext import clean, lone_surrogate

__all__ = [
    "ATTRIBUTE_KEY_MAX_BYTES",
    "ATTRIBUTE_MAX_BYTES",
    "MAX_ATTRIBUTES",
    "MAX_MESSAGE_BYTES",
    "MAX_PUBLISH_MESSAGES",
    "get_subscription",
    "publish",
    "reset_client",
    "topic_exists",
    "topic_path",
    "valid_attribute_key",
    "warm_up",
]

PUBLISH_TIMEOUT = 30.0
# Pub/Sub's documented limits (https://cloud.google.com/pubsub/quotas#resource_limits):
# 100 attributes per message, keys of at most 256 bytes (not starting with "goog"),
# values of at most 1024 bytes, all UTF-8; 10 MB of data, and 1,000 messages and 10 MB
# per publish request.
MAX_ATTRIBUTES = 100
ATTRIBUTE_KEY_MAX_BYTES = 256
ATTRIBUTE_MAX_BYTES = 1024
MAX_MESSAGE_BYTES = 10_000_000
MAX_PUBLISH_MESSAGES = 1000

_publishers: ClientCache[Any] = ClientCache()


def topic_path(project: str, topic: str) -> str:
    return topic if topic.startswith("projects/") else f"projects/{project}/topics/{topic}"


def _client() -> Any:
    def build() -> Any:
        from google.cloud import pubsub_v1  # type: ignore[attr-defined]

        # One message per call, awaited at once: batching would only add its
        # default 10 ms of latency to every invocation.
        return pubsub_v1.PublisherClient(
            batch_settings=pubsub_v1.types.BatchSettings(max_messages=1))

    # The client finds PUBSUB_EMULATOR_HOST itself, when it is created: a process that
    # switches endpoints (tests, one sandbox after another) needs a client per endpoint.
    return _publishers.get(os.environ.get("PUBSUB_EMULATOR_HOST"), build)


def warm_up() -> None:
    """Create the publisher now instead of on the first publish.

    Creating it imports the client library and looks up credentials, which blocks for a
    moment; a caller with latency-sensitive work running does it up front.
    Raises ConfigError when there are no credentials.
    """
    from google.auth import exceptions as auth_exc

    try:
        _client()
    except auth_exc.DefaultCredentialsError as exc:
        raise ConfigError(f"no credentials for Pub/Sub: {exc}") from exc


def reset_client() -> None:
    """Forget the cached clients (tests that switch endpoints)."""
    _publishers.reset()
    _subscribers.reset()


def valid_attribute_key(key: str) -> bool:
    """Whether Pub/Sub accepts ``key`` as an attribute name."""
    return (lone_surrogate(key) is None and 0 < len(key.encode("utf-8")) <= ATTRIBUTE_KEY_MAX_BYTES
            and not key.startswith("goog"))


def _clip(value: str) -> str:
    """The value as Pub/Sub accepts it: UTF-8 (lone surrogates replaced), ≤ 1024 bytes."""
    encoded = clean(value, ATTRIBUTE_MAX_BYTES).text.encode("utf-8")
    if len(encoded) <= ATTRIBUTE_MAX_BYTES:
        return encoded.decode("utf-8")
    return encoded[: ATTRIBUTE_MAX_BYTES - 3].decode("utf-8", "ignore") + "..."


def _retry(timeout: float) -> Any:
    """The library's publish retry policy, with its deadline cut to ``timeout``."""
    from google.api_core import exceptions as gexc
    from google.api_core import retry

    return retry.Retry(
        initial=0.1, maximum=min(60.0, timeout), multiplier=4, timeout=timeout,
        predicate=retry.if_exception_type(
            gexc.Aborted, gexc.Cancelled, gexc.DeadlineExceeded, gexc.InternalServerError,
            gexc.ResourceExhausted, gexc.ServiceUnavailable, gexc.Unknown))


def publish(project: str, topic: str, data: bytes, attributes: dict[str, str] | None = None,
            *, timeout: float = PUBLISH_TIMEOUT) -> str:
    """Publish one message and return its id once the server has stored it.

    ``timeout`` (seconds) bounds the client's retries and the wait for them.
    Attribute values are made to fit (UTF-8, 1024 bytes); keys are the caller's to
    get right. Raises MissingTargetError when the topic does not exist,
    PermissionDeniedError without the publisher role, RateLimitedError or
    UnavailableError when Pub/Sub cannot take it now, ConfigError without
    credentials, PermanentError when it (or the client, before sending) refuses the
    message.
    """
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exc

    path = topic_path(project, topic)
    attrs = {k: _clip(v) for k, v in (attributes or {}).items()}
    try:
        future = _client().publish(path, data, retry=_retry(timeout), timeout=timeout, **attrs)
        # A little longer than the client's deadline, so its own error (which names the
        # cause) arrives before this wait gives up.
        return str(future.result(timeout=timeout + 1.0))
    except gexc.NotFound as exc:
        raise MissingTargetError(f"topic {path} does not exist") from exc
    except (gexc.PermissionDenied, gexc.Unauthenticated) as exc:
        raise PermissionDeniedError(f"publishing to {path}: {exc}") from exc
    except auth_exc.DefaultCredentialsError as exc:
        raise ConfigError(f"no credentials to publish to {path}: {exc}") from exc
    except (gexc.TooManyRequests, gexc.ResourceExhausted) as exc:
        raise RateLimitedError(f"publishing to {path}: {exc}") from exc
    except gexc.InvalidArgument as exc:
        raise PermanentError(f"publishing to {path}: {exc}") from exc
    except (ValueError, TypeError) as exc:
        # Refused by the client before sending: a key it cannot encode, a message over
        # the 10 MB request limit (MessageTooLargeError is a ValueError).
        raise PermanentError(f"publishing to {path}: {type(exc).__name__}: {exc}") from exc
    except TimeoutError as exc:
        # Before OSError, of which it is a subclass: its message is empty.
        raise UnavailableError(f"publishing to {path}: no answer within {timeout:g} s") from exc
    except (gexc.GoogleAPICallError, gexc.RetryError, OSError) as exc:
        raise UnavailableError(f"publishing to {path}: {exc}") from exc


# --- reading the deployment (accelops doctor) --------------------------------------

_subscribers: ClientCache[Any] = ClientCache()
ADMIN_TIMEOUT = 10.0


def _subscriber() -> Any:
    def build() -> Any:
        from google.cloud import pubsub_v1  # type: ignore[attr-defined]

        return pubsub_v1.SubscriberClient()

    return _subscribers.get(os.environ.get("PUBSUB_EMULATOR_HOST"), build)


def _admin_call(what: str, call: Any) -> Any:
    """Run one admin read; None when the resource does not exist."""
    from google.api_core import exceptions as gexc

    try:
        return call()
    except gexc.NotFound:
        return None
    except (gexc.PermissionDenied, gexc.Unauthenticated) as exc:
        raise PermissionDeniedError(f"{what}: {exc}") from exc
    except (gexc.GoogleAPICallError, gexc.RetryError, OSError) as exc:
        raise UnavailableError(f"{what}: {exc}") from exc


def topic_exists(project: str, topic: str) -> bool:
    path = topic_path(project, topic)
    found = _admin_call(f"topic {path}", lambda: _client().get_topic(
        request={"topic": path}, timeout=ADMIN_TIMEOUT))
    return found is not None


def get_subscription(project: str, subscription: str) -> dict[str, Any] | None:
    """The settings of a subscription that accelops deploys, or None when it is absent."""
    path = f"projects/{project}/subscriptions/{subscription}"
    sub = _admin_call(f"subscription {path}", lambda: _subscriber().get_subscription(
        request={"subscription": path}, timeout=ADMIN_TIMEOUT))
    if sub is None:
        return None
    retry, dead_letter, push = sub.retry_policy, sub.dead_letter_policy, sub.push_config
    return {
        "topic": sub.topic,
        "push_endpoint": push.push_endpoint,
        "oidc_service_account": push.oidc_token.service_account_email,
        "ack_deadline_seconds": sub.ack_deadline_seconds,
        "minimum_backoff": retry.minimum_backoff.total_seconds()
        if retry.minimum_backoff else None,
        "maximum_backoff": retry.maximum_backoff.total_seconds()
        if retry.maximum_backoff else None,
        "dead_letter_topic": dead_letter.dead_letter_topic,
        "max_delivery_attempts": dead_letter.max_delivery_attempts,
    }
