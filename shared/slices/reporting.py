"""Publishing the lifecycle transitions a reconcile_slices run observed.

The transitions are derived by :func:`shared.slices.events.derive_events` (pure) from
the run's view and the slice record; this module publishes them (one message,
awaited) and marks them reported in the record, which the caller then saves:

* only a run whose view of the record is the latest publishes. A run that wrote the
  record under its lock already (one starting operations) is; any other first writes
  the record marked ``reporting`` — a run finding that mark fresh neither publishes
  nor writes the record, like one finding another run starting operations — and a
  concurrent write since it read the record (409) leaves the reporting to the run
  that wrote it;
* a failed publish saves the rest of the record (operations started, operations
  ended, which wait in ``record.ended``) and raises: the transitions stay unreported,
  and the next run publishes them at the same instants, under the same keys.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from shared.errors import AccelopsError, ConflictError
from shared.log import get_logger
from shared.slices.events import SliceOperation, derive_events
from shared.slices.record import SliceRecord, save_if_changed, save_record
from shared.telemetry.emit import publish_job_events

if TYPE_CHECKING:
    from shared.config import AccelopsConfig, Settings
    from shared.kube import KubeClient
    from shared.nodepools import OperationInfo
    from shared.slices.lifecycle import JobState
    from shared.slices.model import PoolView

__all__ = ["REPORTING_SECONDS", "report", "reporting_elsewhere", "slice_operation"]

log = get_logger("accelops.slices")

# A run publishing lifecycle transitions is presumed dead after this long (this
# machine's clock): a publish waits at most 30 s (shared.pubsub).
REPORTING_SECONDS = 60.0


def reporting_elsewhere(record: SliceRecord) -> bool:
    """Whether another run is publishing transitions now; a stale mark (its run died)
    is cleared, and its transitions are derived again."""
    if time.time() - record.reporting < REPORTING_SECONDS:
        return True
    record.reporting = 0.0
    return False


def slice_operation(entry: dict[str, Any], info: OperationInfo | None = None,
                     now: float | None = None) -> dict[str, Any] | None:
    """A recorded operation as the lifecycle sees it (:class:`SliceOperation` fields);
    ``info``: it ended (at ``now`` when GKE gave no end time). None for one not on a
    slice of a JobSet."""
    if entry.get("slice") is None or not entry.get("jobset"):
        return None
    started = entry.get("op_started") or entry.get("started")
    return {"action": "create" if entry["action"] == "create" else "delete",
            "jobset": str(entry["jobset"]), "slice_index": int(entry["slice"]),
            "pool": str(entry["pool"]),
            "started_at": float(started) if started is not None else None,
            "ended_at": None if info is None else (info.end_time or now),
            "failed": info is not None and info.error is not None}


def report(record: SliceRecord, states: Mapping[str, JobState], pools: Iterable[PoolView],
           kube: KubeClient, settings: Settings, config: AccelopsConfig, now: float, *,
           claimed: bool) -> int:
    """Publish the lifecycle transitions this run observed (see the module docstring),
    then mark them reported in the record, which the caller saves; returns how many
    were published. ``claimed``: this run wrote the record under its lock already.

    Raises what :func:`shared.telemetry.emit.publish_job_events` raises, after saving the
    record without the marks.
    """
    operations = [SliceOperation(**entry) for entry in record.ended]
    operations += [SliceOperation(**op) for entry in record.operations
                   if (op := slice_operation(entry)) is not None]
    telemetry = derive_events(states, pools, operations, record.jobs, record.done, now)
    namespace = config.slices.state_namespace
    if telemetry.records and not claimed:
        record.reporting = time.time()
        try:
            save_record(kube, namespace, record)
        except ConflictError:
            log.info("slice record changed by a concurrent run; it reports the transitions")
            return 0
        finally:
            record.reporting = 0.0  # cleared by the caller's save, whatever happens
    try:
        publish_job_events(settings, config, telemetry.records)
    except AccelopsError:
        save_if_changed(kube, namespace, record)
        raise
    record.jobs, record.done, record.ended = telemetry.jobs, list(telemetry.done), []
    return len(telemetry.records)
