"""The common shape of every Pub/Sub-triggered entry point.

Parse the CloudEvent into a :class:`PubSubMessage`, run one core function with the
event id bound to every log line, and map the outcome onto the platform's
semantics, as the error types decide it (``shared/errors.py``): return → 2xx
(ack); an error whose ``retry`` is true (transient failures and deployment
mistakes), or anything unexpected, propagates → 5xx (Pub/Sub retries with backoff,
then dead-letters); any other :class:`AccelopsError` is logged with its reason and
acknowledged. Each is logged at the error's ``severity``. An event that is
not a Pub/Sub message at all raises :class:`InvalidEventError`, which the entry
points answer with 400 (see ``shared/entry_errors.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from shared.errors import AccelopsError, InvalidEventError
from shared.events import PubSubMessage, parse_pubsub_event
from shared.log import bind_event, configure, get_logger

__all__ = ["handle_event", "handle_pubsub"]

log = get_logger("accelops.handler")
T = TypeVar("T")
E = TypeVar("E")


def handle_pubsub(cloud_event: Any, core: Callable[[PubSubMessage], T],
                  function: str) -> T | None:
    """Run core on the event's Pub/Sub message; see the module docstring for outcomes."""

    def parse(event: Any) -> PubSubMessage:
        return parse_pubsub_event(event.get("id"), event.data)

    def fields(message: PubSubMessage) -> dict[str, Any]:
        return {"message_id": message.message_id,
                "delivery_attempt": message.delivery_attempt}

    return handle_event(cloud_event, parse, core, function, fields)


def handle_event(cloud_event: Any, parse: Callable[[Any], E], core: Callable[[E], T],
                 function: str, fields: Callable[[E], dict[str, Any]] | None = None,
                 ) -> T | None:
    """Run core on what ``parse`` makes of the event, with the outcomes of the module
    docstring; ``fields`` adds log fields from the parsed event."""
    configure()
    event_id = cloud_event.get("id")
    with bind_event(event_id=event_id, function=function):
        try:
            parsed = parse(cloud_event)
        except InvalidEventError as exc:
            log.error(f"event cannot be read: {exc.message}", **exc.as_fields())
            raise
        with bind_event(**(fields(parsed) if fields is not None else {})):
            try:
                return core(parsed)
            except AccelopsError as exc:
                outcome = "will retry" if exc.retry else "acknowledged without effect"
                log.at(exc.severity, f"{outcome}: {exc.message}", **exc.as_fields())
                if exc.retry:
                    raise
                return None
