"""Publishing job lifecycle records on the metrics topic, awaited.

``submit_job`` and ``reconcile_slices`` hand the transitions they observed here;
``ingest_metrics`` writes them to the ``job_events`` table. The publish is awaited
before the caller acknowledges its event (or marks the transitions reported), so a
transition is never lost: when Pub/Sub cannot take it the caller's event is retried
and the same records — same keys — are published again.

One message carries a run's records. A run that observed more than
:data:`RECORDS_PER_MESSAGE` transitions (the first run over a cluster full of
JobSets) sends one message per that many, each far inside what ``ingest_metrics``
accepts in one message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shared import pubsub
from shared.log import get_logger
from shared.metrics.job_event import JobEventRecord, job_event_message

if TYPE_CHECKING:
    from shared.config import AccelopsConfig, Settings

__all__ = ["RECORDS_PER_MESSAGE", "publish_job_events"]

log = get_logger("accelops.jobs")

# A record is a few hundred bytes: a thousand stay well under a megabyte, and under
# the 5,000 records ingest_metrics takes in one message.
RECORDS_PER_MESSAGE = 1000


def publish_job_events(settings: Settings, config: AccelopsConfig,
                       records: Sequence[JobEventRecord]) -> int:
    """Publish ``records`` on ``topics.loadtest_metrics`` and wait until Pub/Sub stored
    them; returns the number of messages published (0 for no records).

    Raises what :func:`shared.pubsub.publish` raises: TransientError subclasses when
    Pub/Sub cannot take the message now or the deployment is incomplete (no project,
    no topic), so the caller's event is retried.
    """
    if not records:
        return 0

    settings.require("project")
    assert settings.project is not None
    messages = 0
    for start in range(0, len(records), RECORDS_PER_MESSAGE):
        data, attributes = job_event_message(records[start:start + RECORDS_PER_MESSAGE])
        pubsub.publish(settings.project, config.topics.loadtest_metrics, data, attributes)
        messages += 1
    log.info(f"published {len(records)} job event(s)", events=len(records),
             kinds=",".join(sorted({r.event for r in records})))
    return messages
