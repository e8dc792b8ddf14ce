"""What describes a load test as a whole, recorded once per test rather than inferred.

The load generator publishes a run record on the metrics topic when a test starts
(``phase`` ``start``: what was asked for) and when it stops (``stop``: when, and how
many users were running), as a message with the attribute ``kind=run`` and one JSON
object as data. ``ingest_metrics`` writes it to the runs table; the summary takes the
test's model, server and accelerator from here, never from whichever request row
BigQuery happens to read first.

The row key is ``<test id>:<phase>``, not the Pub/Sub message id: every Locust worker
publishes the same record, and the copies (and redeliveries) must collapse into one.
A test without run records (an older load generator) still gets a summary: its model
is then the one most of its requests named, and the summary says it was inferred.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from shared.metrics.record import Count, Short, TestId, parse_instant

__all__ = ["KIND_ATTRIBUTE", "RUN_KIND", "Phase", "RunRecord", "run_row_key"]

#: The message attribute that marks a run record (request batches carry none, or
#: ``requests``), so a subscriber can tell them apart without parsing the body.
KIND_ATTRIBUTE = "kind"
RUN_KIND = "run"

Phase = Literal["start", "stop"]
# Seconds; a week is longer than any load test anyone runs on purpose.
_Seconds = Annotated[float, Field(ge=0, le=604_800)]
# An objective of 0 ms could never be met; one over a day is no objective.
_SloMillis = Annotated[float, Field(gt=0, le=86_400_000)]


class RunRecord(BaseModel):
    """One test's run metadata at one phase. Unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    test_id: TestId
    phase: Phase
    at: datetime
    model_name: Short | None = None
    server: Short | None = None
    accelerator: Short | None = None
    # The users asked for (--users), across all workers.
    users: Count | None = None
    spawn_rate: Annotated[float, Field(ge=0, le=1_000_000)] | None = None
    # --run-time; None when the test runs until it is stopped.
    run_time_s: _Seconds | None = None
    locust_version: Short | None = None
    loadgen_revision: Short | None = None
    # The target, as given to --host (scheme, host and path; credentials are stripped
    # by the load generator before publishing).
    host: Annotated[str, Field(max_length=1024)] | None = None
    # Service-level objectives given with the test (ms); a request meets the test's
    # SLOs when it succeeded and is within every one given (see test_summary's
    # goodput). None: no objective on that measure.
    slo_ttft_ms: _SloMillis | None = None
    slo_tpot_ms: _SloMillis | None = None
    slo_latency_ms: _SloMillis | None = None

    @field_validator("at", mode="before")
    @classmethod
    def _at(cls, value: Any) -> datetime:
        return parse_instant(value)


def run_row_key(test_id: str, phase: str) -> str:
    """The row key of a test's run record at ``phase``: the same from every worker."""
    return f"{test_id}:{phase}"
