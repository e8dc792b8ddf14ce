"""One load-test request as the load generator reports it, and how it becomes a row.

The field names keep the metrics schema of the Saxml-on-GKE load-test reference
(test_id, request_type, request_name, response_length, response_time in ms, start_time,
exception, model_name, model_method, tokenizer, num_input_tokens, num_output_tokens,
model_response_time) so its dashboards and queries keep working; accelops adds, on
every record, the server, accelerator, user count and worker, and for streamed requests
``time_to_first_token``, ``time_per_output_token`` and ``inter_token_latencies``
(defined in :mod:`services.loadgen.token_timing`, as vLLM's serving benchmark and
inference-perf define them). Records of older load generators lack the last two: they
read as null and as no gaps. What describes the run as a whole (target model, spawn rate,
Locust version, ...) is recorded once per test instead: :mod:`shared.metrics.run`.

A Pub/Sub message carries a JSON array of records (or one record object). A record's
row key is ``<message id>:<index in the message>``: the same message delivered twice
yields the same keys, which is what the views de-duplicate on.

Types are strict, as in a job request: a count is a JSON integer (not ``4.0``, not
``"4"``), a duration a JSON number (``true`` is not 1 ms), text is a string.
``start_time`` is epoch seconds or an ISO 8601 timestamp with a timezone, between 2000
and 2100.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)

__all__ = [
    "MAX_EXCEPTION_CHARS",
    "MAX_INTER_TOKEN_LATENCIES",
    "Count",
    "Instant",
    "MetricRecord",
    "Millis",
    "Short",
    "TestId",
    "parse_instant",
    "row_key",
]

MAX_EXCEPTION_CHARS = 2048
# Gaps kept per streamed request: 2,048 gaps are ~14 KB of JSON, so a message of 500
# records stays under Pub/Sub's 10 MB and an insert of 500 rows under BigQuery's.
MAX_INTER_TOKEN_LATENCIES = 2048
# Locust names requests by URL path; a test id goes into file names and URLs, so it is
# kept to a safe alphabet.
TestId = Annotated[str, StringConstraints(min_length=1, max_length=128,
                                          pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")]
Short = Annotated[str, StringConstraints(max_length=256)]
Count = Annotated[int, Field(ge=0, le=10**9)]
# One day in milliseconds: anything slower is a clock bug, not a latency.
Millis = Annotated[float, Field(ge=0, le=86_400_000)]
# 2000-01-01 .. 2100-01-01: epoch seconds outside this are milliseconds or garbage.
_EPOCH_MIN, _EPOCH_MAX = 946_684_800, 4_102_444_800
_START_RULE = "must be epoch seconds or an ISO 8601 timestamp with a timezone"


class MetricRecord(BaseModel):
    """One request of a load test. Unknown fields are ignored (newer load generators)."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    test_id: TestId
    request_type: Short
    request_name: Annotated[str, StringConstraints(max_length=1024)]
    response_length: Count = 0
    response_time: Millis
    start_time: datetime
    exception: str | None = None
    model_name: Short | None = None
    model_method: Short | None = None
    tokenizer: Short | None = None
    num_input_tokens: Count | None = None
    num_output_tokens: Count | None = None
    model_response_time: Millis | None = None
    # Streaming requests only: from sending the request to the first token received.
    time_to_first_token: Millis | None = None
    # Run metadata, the same on every record of a run.
    server: Short | None = None
    accelerator: Short | None = None
    users: Count | None = None
    # Streaming requests with two tokens or more: (end of stream - time to first
    # token) / (output tokens - 1).
    time_per_output_token: Millis | None = None
    # Streaming requests: ms between successive token events, the first
    # MAX_INTER_TOKEN_LATENCIES of them (a BigQuery REPEATED column: never null).
    inter_token_latencies: list[Millis] = Field(default_factory=list)
    # The Locust process that made the request (a worker's client id) when a test runs
    # on several: the users chart adds up each worker's count.
    worker: Short | None = None

    @field_validator("start_time", mode="before")
    @classmethod
    def _start_time(cls, value: Any) -> datetime:
        return parse_instant(value)

    @field_validator("exception", mode="before")
    @classmethod
    def _clip_exception(cls, value: Any) -> Any:
        # A stack trace is still useful clipped; refusing the record would lose the error.
        if isinstance(value, str):
            return value[:MAX_EXCEPTION_CHARS] or None
        return value

    @field_validator("inter_token_latencies", mode="before")
    @classmethod
    def _bounded_latencies(cls, value: Any) -> Any:
        # null is "none measured"; a longer list keeps its first gaps, as the load
        # generator does, rather than losing the request's record.
        if value is None:
            return []
        if isinstance(value, list):
            return value[:MAX_INTER_TOKEN_LATENCIES]
        return value

    @property
    def failed(self) -> bool:
        return self.exception is not None


def parse_instant(value: Any) -> datetime:
    """Epoch seconds (as Locust reports them) or an ISO 8601 timestamp with a timezone,
    between 2000 and 2100, as an aware UTC datetime; ValueError names the rule.

    The range is checked before any conversion: a 310-digit number cannot become a
    float, and 9999-12-31T23:59:59-01:00 has no UTC equivalent.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(_START_RULE)
    if not isinstance(value, str):
        if not _EPOCH_MIN <= value <= _EPOCH_MAX:  # False for NaN, too
            raise ValueError("epoch seconds out of range (2000..2100)")
        return datetime.fromtimestamp(value, UTC)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(_START_RULE) from None
    if parsed.tzinfo is None:
        raise ValueError("must carry a timezone (or be epoch seconds)")
    if not 1999 <= parsed.year <= 2100:  # a day either side for the offset
        raise ValueError("out of range (2000..2100)")
    parsed = parsed.astimezone(UTC)
    if not _EPOCH_MIN <= parsed.timestamp() <= _EPOCH_MAX:
        raise ValueError("out of range (2000..2100)")
    return parsed


def _instant(value: Any) -> datetime:
    # JSON holds epoch seconds or text; a publisher building records in Python hands a
    # datetime, held to the same rules through its ISO form (aware, in range).
    if isinstance(value, datetime):
        value = value.isoformat()
    return parse_instant(value)


# When something happened, as a record field: see :func:`parse_instant`.
Instant = Annotated[datetime, BeforeValidator(_instant)]


def row_key(message_id: str, index: int) -> str:
    """The deterministic key of the ``index``-th record of a Pub/Sub message."""
    return f"{message_id}:{index}"
