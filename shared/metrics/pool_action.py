"""What ``pool_schedule`` did to a node pool, recorded once per action for audit and savings.

Off hours, ``pool_schedule`` removes scheduled node pools (resized to zero, or deleted
after their spec is saved) and restores them before on-hours (resized back, or
recreated); a pool still busy is left up (``skip``). Each of these becomes one record,
published on the metrics topic as a message with the attribute ``kind=pool_action``
whose data is a JSON array of records (:func:`pool_action_message`). ``ingest_metrics``
writes them to the ``pool_actions`` table; the ``pool_savings_daily`` view pairs each
removal with the next restore of the same pool and counts the accelerator-hours saved.

The row key is the record's ``action_id``, chosen by the publisher and deterministic
(:func:`pool_action_id`: the pool, the action and the period it belongs to — the
off-hours a removal is for, the on-hours a restore is for), so ticks that report the
same action again, or a redelivered message, are one row in the views, not two.

Types are strict, as in every metric record: a count is a JSON integer, ``forced`` a
JSON boolean, ``at`` epoch seconds or an ISO 8601 timestamp with a timezone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
)

from shared.metrics.record import Count, Instant, Short
from shared.metrics.run import KIND_ATTRIBUTE

__all__ = ["POOL_ACTION_KIND", "Action", "ActionId", "Method", "PoolActionRecord",
           "pool_action_id", "pool_action_message"]

POOL_ACTION_KIND = "pool_action"

Action = Literal["remove", "restore", "skip"]
Method = Literal["resize", "delete", "recreate"]
# Resource paths and ISO instants (``projects/p/.../pool-a:remove:2026-11-23T18:00:00+00:00``).
ActionId = Annotated[str, StringConstraints(min_length=1, max_length=512,
                                            pattern=r"^[A-Za-z0-9][A-Za-z0-9/:._+-]*$")]
_Name = Annotated[str, StringConstraints(min_length=1, max_length=256)]
# How each action may be carried out: a pool is removed by resizing it to zero or by
# deleting it, and restored by resizing it back or recreating it; a skip does nothing.
_METHODS: dict[str, tuple[str, ...]] = {
    "remove": ("resize", "delete"), "restore": ("resize", "recreate"), "skip": ()}


class PoolActionRecord(BaseModel):
    """One action on one node pool. Unknown fields are ignored (newer publishers)."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    action_id: ActionId
    # When the action was taken (the tick's instant, not when it was ingested).
    at: Instant
    project: _Name
    location: _Name
    cluster: _Name
    pool: _Name
    action: Action
    method: Annotated[Method | None, Field(validate_default=True)] = None
    reason: Annotated[str, StringConstraints(max_length=1024)]
    accelerator_type: Short | None = None
    # Accelerators (TPU chips or GPUs) the pool holds when it is up.
    accelerator_count: Count
    schedule: Short | None = None
    team: Short | None = None
    forced: bool = False

    @field_validator("method")
    @classmethod
    def _method_fits_action(cls, value: str | None, info: ValidationInfo) -> str | None:
        action = info.data.get("action")
        if action is None:  # the action itself was refused; that is the error to report
            return value
        allowed = _METHODS[action]
        if value is None and allowed:
            raise ValueError(f"a {action} names how it was done: {' or '.join(allowed)}")
        if value is not None and not allowed:
            raise ValueError(f"a {action} changes nothing, so it has no method (got {value})")
        if value is not None and value not in allowed:
            raise ValueError(f"a {action} is done by {' or '.join(allowed)}, not {value}")
        return value


def pool_action_id(project: str, location: str, cluster: str, pool: str, action: str,
                   period: datetime | str) -> str:
    """The deterministic row key of ``action`` on a pool in ``period`` (an aware
    datetime, or a key such as ``off-2026-11-23T18:00:00+00:00``):
    ``projects/P/locations/L/clusters/C/POOL:ACTION:PERIOD``."""
    key = period.isoformat() if isinstance(period, datetime) else period
    return f"projects/{project}/locations/{location}/clusters/{cluster}/{pool}:{action}:{key}"


def pool_action_message(records: Iterable[PoolActionRecord]) -> tuple[bytes, dict[str, str]]:
    """The data and attributes of the metrics-topic message carrying ``records``.

    One message per tick is the intent: ``ingest_metrics`` rejects a message beyond
    :data:`shared.metrics.ingest.MESSAGE_LIMITS` whole.
    """
    data = json.dumps([record.model_dump(mode="json") for record in records],
                      separators=(",", ":"), ensure_ascii=False).encode()
    return data, {KIND_ATTRIBUTE: POOL_ACTION_KIND}
