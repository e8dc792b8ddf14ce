"""``ingest_metrics``: Pub/Sub messages of load-test records → BigQuery rows.

A message carries a JSON array of records (or a single record). Each record is
validated on its own: good ones become rows of the requests table, bad ones rows of
the rejections table with the reason, so one poison record never sinks the batch
(partial failure) and never disappears silently. Both are written before the
handler returns; any BigQuery failure raises, Pub/Sub redelivers, and the
redelivered rows carry the same keys (``<message id>:<index>``), which BigQuery's
insertIds and the ``requests_unique`` view de-duplicate.

Decoding and validation (:func:`parse_message`) are pure; :func:`store` is the only
I/O, in insert requests of at most 500 rows and well under BigQuery's 10 MB limit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from shared.config import format_validation_error
from shared.metrics.batch import split
from shared.metrics.record import MetricRecord, row_key

if TYPE_CHECKING:
    from shared.events import PubSubMessage

__all__ = [
    "MAX_INSERT_BYTES",
    "MAX_INSERT_ROWS",
    "Parsed",
    "ingest_message",
    "insert_batches",
    "parse_message",
    "row_size",
    "store",
]

MAX_INSERT_ROWS = 500
# BigQuery refuses insertAll requests over 10 MB; stay clear of it with the envelope.
MAX_INSERT_BYTES = 9_000_000
MAX_REJECTED_RECORD_CHARS = 16_384
# Reasons shown in the log line of a message with rejections (the table has them all).
LOGGED_REASONS = 5


@dataclass
class Parsed:
    """What one message turned into."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    rejections: list[dict[str, Any]] = field(default_factory=list)


def _reject(parsed: Parsed, message_id: str, received_at: str, index: int | None,
            reason: str, raw: Any) -> None:
    test_id = raw.get("test_id") if isinstance(raw, Mapping) else None
    text = raw if isinstance(raw, str) else json.dumps(raw, default=str)
    parsed.rejections.append({
        "row_key": row_key(message_id, index) if index is not None else f"{message_id}:message",
        "message_id": message_id,
        "received_at": received_at,
        "record_index": index,
        "test_id": test_id if isinstance(test_id, str) else None,
        "reason": reason,
        "record": text[:MAX_REJECTED_RECORD_CHARS],
    })


def parse_message(message_id: str, data: bytes, received_at: datetime) -> Parsed:
    """Validate every record of one message into rows and rejections (pure)."""
    at = received_at.astimezone(UTC).isoformat()
    parsed = Parsed()
    try:
        payload = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        _reject(parsed, message_id, at, None, f"data: not UTF-8 JSON ({exc})",
                data[:MAX_REJECTED_RECORD_CHARS].decode("utf-8", "replace"))
        return parsed
    if isinstance(payload, dict):
        payload = [payload]
    if not isinstance(payload, list):
        _reject(parsed, message_id, at, None,
                "data: must be a JSON array of records or one record object", payload)
        return parsed
    for index, raw in enumerate(payload):
        if not isinstance(raw, dict):
            _reject(parsed, message_id, at, index, "record: must be a JSON object", raw)
            continue
        try:
            record = MetricRecord.model_validate(raw)
        except ValidationError as exc:
            _reject(parsed, message_id, at, index, format_validation_error(exc)[0], raw)
            continue
        row = dict(record.__dict__)
        row["start_time"] = record.start_time.isoformat()
        row["row_key"] = row_key(message_id, index)
        row["message_id"] = message_id
        row["ingested_at"] = at
        parsed.rows.append(row)
    return parsed


def _text_cost(text: str) -> int:
    n = len(text)
    return n + 2 if text.isascii() and text.isprintable() else 12 * n + 2


def row_size(row: Mapping[str, Any]) -> int:
    """An upper bound of the row's size in the insert request's JSON.

    Cheaper than encoding twice: printable ASCII costs its length; any other text is
    counted as if every character were escaped (``\\uXXXX``, 12 bytes for a surrogate
    pair). The row's ``row_key`` is counted twice, as it is also the insertId.
    """
    size = 32 + _text_cost(str(row.get("row_key", "")))  # {"insertId": ..., "json": {}}
    for key, value in row.items():
        size += _text_cost(key) + 4
        size += _text_cost(value) if isinstance(value, str) else 24
    return size


def insert_batches(rows: Sequence[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """The rows in insert-sized batches (≤ 500 rows, ≤ 9 MB)."""
    return split(((row, row_size(row)) for row in rows),
                 max_count=MAX_INSERT_ROWS, max_bytes=MAX_INSERT_BYTES)


def store(project: str, table: str, rows: Sequence[dict[str, Any]]) -> int:
    """Insert rows (keyed by ``row_key``); returns the number of insert requests.

    Raises the adapter's TransientError subclasses; rows already inserted by an
    earlier request of a failed call are re-inserted by the redelivery with the same
    keys, which the views de-duplicate.
    """
    from shared import bigquery as bq

    requests = 0
    for batch in insert_batches(rows):
        bq.insert_rows(project, table, batch, [row["row_key"] for row in batch])
        requests += 1
    return requests


@dataclass(frozen=True, slots=True)
class IngestResult:
    rows: int
    rejected: int
    insert_requests: int


def ingest_message(message: PubSubMessage) -> IngestResult:
    """The core of ``ingest_metrics`` for one PubSubMessage; see the module docstring.

    Raises TransientError (retry) when the settings are incomplete or BigQuery fails.
    """
    from shared.config import AccelopsConfig, Settings, load_config_or_retry
    from shared.errors import ConfigError, TransientError
    from shared.log import get_logger
    from shared.metrics.schema import Names

    log = get_logger("accelops.metrics")
    settings = Settings.from_env()
    config = load_config_or_retry(settings) if settings.config_source else AccelopsConfig()
    try:
        # A deployment mistake, not the message's fault: retry until it is fixed.
        settings.require("project")
        assert settings.project is not None
        names = Names.of(settings.project, config.metrics)
    except ConfigError as exc:
        raise TransientError(f"cannot store metrics: {exc.message}") from exc

    parsed = parse_message(message.message_id, message.data, datetime.now(UTC))
    requests = store(settings.project, names.ref(names.table), parsed.rows)
    requests += store(settings.project, names.ref(names.rejections_table), parsed.rejections)
    result = IngestResult(len(parsed.rows), len(parsed.rejections), requests)
    if parsed.rejections:
        reasons = "; ".join(
            f"record {r['record_index'] if r['record_index'] is not None else '(message)'}: "
            f"{r['reason']}" for r in parsed.rejections[:LOGGED_REASONS])
        log.error(f"stored {result.rows} records, rejected {result.rejected}: {reasons}",
                  rows=result.rows, rejected=result.rejected,
                  rejections_table=names.ref(names.rejections_table))
    else:
        log.info(f"stored {result.rows} records", rows=result.rows,
                 insert_requests=result.insert_requests)
    return result
