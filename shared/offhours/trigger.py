"""The pool_schedule core as a Pub/Sub handler.

Every message is a Cloud Scheduler tick, and every tick applies the schedules to
every pool in scope, so the content never matters and duplicates are harmless.
A tick never forces: removing a busy pool is for a person, from the CLI
(``accelops schedule run --force``), never for whoever may publish to the topic.
"""

from __future__ import annotations

from shared.config import Settings, load_config_or_retry
from shared.events import PubSubMessage
from shared.offhours.tick import TickReport, run_tick

__all__ = ["on_message"]


def on_message(message: PubSubMessage) -> TickReport:
    settings = Settings.from_env()
    return run_tick(settings, load_config_or_retry(settings))
