"""The common shape of every Pub/Sub-triggered entry point.

Parse the CloudEvent into a :class:`PubSubMessage`, run one core function with the
event id bound to every log line, and map the outcome onto the platform's
semantics: return → 2xx (ack); :class:`TransientError` (or anything unexpected)
propagates → 5xx (Pub/Sub retries with backoff, then dead-letters);
:class:`PermanentError` → logged with its reason and acknowledged. An event that is
not a Pub/Sub message at all raises :class:`InvalidEventError`, which the entry
points answer with 400 (see ``shared/entry_errors.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from shared.errors import InvalidEventError, PermanentError, TransientError
from shared.events import PubSubMessage, parse_pubsub_event
from shared.log import bind_event, configure, get_logger

__all__ = ["handle_pubsub"]

log = get_logger("accelops.handler")
T = TypeVar("T")


def handle_pubsub(cloud_event: Any, core: Callable[[PubSubMessage], T],
                  function: str) -> T | None:
    """Run core on the event's Pub/Sub message; see the module docstring for outcomes."""
    configure()
    event_id = cloud_event.get("id")
    with bind_event(event_id=event_id, function=function):
        try:
            message = parse_pubsub_event(event_id, cloud_event.data)
        except InvalidEventError as exc:
            log.error(f"event is not a Pub/Sub message: {exc.message}", **exc.as_fields())
            raise
        with bind_event(message_id=message.message_id,
                        delivery_attempt=message.delivery_attempt):
            try:
                return core(message)
            except TransientError as exc:
                log.warning(f"will retry: {exc.message}", **exc.as_fields())
                raise
            except PermanentError as exc:
                log.error(f"acknowledged without effect: {exc.message}", **exc.as_fields())
                return None
