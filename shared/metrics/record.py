"""One load-test request as the load generator reports it, and how it becomes a row.

The field names keep the metrics schema of the Saxml-on-GKE load-test reference
(test_id, request_type, request_name, response_length, response_time in ms, start_time,
exception, model_name, model_method, tokenizer, num_input_tokens, num_output_tokens,
model_response_time) so its dashboards and queries keep working; accelops adds the run
metadata (server, accelerator, users) that lets runs be compared.

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

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

__all__ = ["MAX_EXCEPTION_CHARS", "MetricRecord", "row_key"]

MAX_EXCEPTION_CHARS = 2048
# Locust names requests by URL path; a test id goes into file names and URLs, so it is
# kept to a safe alphabet.
TestId = Annotated[str, StringConstraints(min_length=1, max_length=128,
                                          pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")]
_Short = Annotated[str, StringConstraints(max_length=256)]
_Count = Annotated[int, Field(ge=0, le=10**9)]
# One day in milliseconds: anything slower is a clock bug, not a latency.
_Millis = Annotated[float, Field(ge=0, le=86_400_000)]
# 2000-01-01 .. 2100-01-01: epoch seconds outside this are milliseconds or garbage.
_EPOCH_MIN, _EPOCH_MAX = 946_684_800, 4_102_444_800
_START_RULE = "must be epoch seconds or an ISO 8601 timestamp with a timezone"


class MetricRecord(BaseModel):
    """One request of a load test. Unknown fields are ignored (newer load generators)."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    test_id: TestId
    request_type: _Short
    request_name: Annotated[str, StringConstraints(max_length=1024)]
    response_length: _Count = 0
    response_time: _Millis
    start_time: datetime
    exception: str | None = None
    model_name: _Short | None = None
    model_method: _Short | None = None
    tokenizer: _Short | None = None
    num_input_tokens: _Count | None = None
    num_output_tokens: _Count | None = None
    model_response_time: _Millis | None = None
    # Run metadata, the same on every record of a run.
    server: _Short | None = None
    accelerator: _Short | None = None
    users: _Count | None = None

    @field_validator("start_time", mode="before")
    @classmethod
    def _start_time(cls, value: Any) -> datetime:
        """Locust reports start times as epoch seconds; ISO strings are accepted too.

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

    @field_validator("exception", mode="before")
    @classmethod
    def _clip_exception(cls, value: Any) -> Any:
        # A stack trace is still useful clipped; refusing the record would lose the error.
        if isinstance(value, str):
            return value[:MAX_EXCEPTION_CHARS] or None
        return value

    @property
    def failed(self) -> bool:
        return self.exception is not None


def row_key(message_id: str, index: int) -> str:
    """The deterministic key of the ``index``-th record of a Pub/Sub message."""
    return f"{message_id}:{index}"
