"""``ingest_metrics``: Pub/Sub messages of load-test records → BigQuery rows.

A message carries a JSON array of records (or a single record), within
:data:`MESSAGE_LIMITS`; one with the attribute ``kind=run`` carries a test's run record
instead (:mod:`shared.metrics.run`), which goes to the runs table, and one with
``kind=pool_action`` an array of node-pool actions (:mod:`shared.metrics.pool_action`),
which go to the pool_actions table, and one with ``kind=job_event`` an array of job
lifecycle transitions (:mod:`shared.metrics.job_event`), which go to the job_events
table. Each record is validated on its own: good ones become rows, bad ones rows of the
rejections table with the reason, so one poison record never sinks the batch (partial
failure) and never disappears silently. A rejection row can always be written, whatever
the record held. Both are written before the handler returns; any BigQuery failure
raises, Pub/Sub redelivers, and the redelivered rows carry the same keys
(``<message id>:<index>``, ``<test id>:<phase>`` for runs, the publisher's ``action_id``
for pool actions and ``event_id`` for job events), which BigQuery's insertIds and the
views de-duplicate.

Decoding and validation (:func:`parse_message` and its siblings) are pure;
:func:`shared.metrics.insert.store` is the only I/O.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from shared.config import AccelopsConfig, Settings, format_validation_error, load_config_or_retry
from shared.errors import PermanentError
from shared.log import get_logger
from shared.metrics.insert import MAX_INSERT_BYTES, MAX_INSERT_ROWS, insert_batches, row_size, store
from shared.metrics.job_event import JOB_EVENT_KIND, JobEventRecord
from shared.metrics.names import Names
from shared.metrics.pool_action import POOL_ACTION_KIND, PoolActionRecord
from shared.metrics.record import MetricRecord, row_key
from shared.metrics.run import KIND_ATTRIBUTE, RUN_KIND, RunRecord, run_row_key
from shared.payload import Limits, check, decode_array
from shared.pubsub import MAX_MESSAGE_BYTES
from shared.safetext import clean, preview

if TYPE_CHECKING:
    from shared.events import PubSubMessage

__all__ = [
    "MAX_INSERT_BYTES",
    "MAX_INSERT_ROWS",
    "MESSAGE_LIMITS",
    "RECORD_LIMITS",
    "Parsed",
    "insert_batches",
    "on_message",
    "parse_job_event_message",
    "parse_message",
    "parse_pool_action_message",
    "parse_run_message",
    "row_size",
    "store",
]

# A message is at most what Pub/Sub carries (10 MB) and 5,000 records (the load
# generator sends 500); each record at most 8 levels deep, strings of 64 Ki characters.
MESSAGE_LIMITS = Limits(max_bytes=MAX_MESSAGE_BYTES, max_depth=9, max_digits=40,
                        max_string_chars=65_536, max_items=5_000)
RECORD_LIMITS = replace(MESSAGE_LIMITS, max_depth=MESSAGE_LIMITS.max_depth - 1)
MAX_REJECTED_RECORD_CHARS = 16_384
MAX_REASON_CHARS = 4_096
# All refused records of one message together keep at most this much text; past it
# each keeps a short preview (a message of 5,000 bad records stays a few MB of rows).
REJECTED_CHARS_PER_MESSAGE = 2_000_000
SHORT_PREVIEW_CHARS = 256
# Reasons shown in the log line of a message with rejections (the table has them all).
LOGGED_REASONS = 5


@dataclass
class Parsed:
    """What one message turned into."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    rejections: list[dict[str, Any]] = field(default_factory=list)
    rejected_chars: int = 0


_Model = TypeVar("_Model", bound=BaseModel)


class _Refused(Exception):
    """One record is refused; the message says which field broke which rule."""


def _reject(parsed: Parsed, message_id: str, received_at: str, index: int | None,
            reason: str, raw: Any, original: bytes | None = None) -> None:
    """Record one refused record (or, with ``index`` None, the whole message).

    Whatever ``raw`` is, the row can be written: the record is previewed (bounded, no
    recursion), lone surrogates replaced and the exact text kept as base64.
    """
    budget = (MAX_REJECTED_RECORD_CHARS if parsed.rejected_chars < REJECTED_CHARS_PER_MESSAGE
              else SHORT_PREVIEW_CHARS)
    text = raw if isinstance(raw, str) else preview(raw, budget)
    record = clean(text, budget)
    parsed.rejected_chars += len(record.text)
    test_id = raw.get("test_id") if isinstance(raw, Mapping) else None
    exact = (base64.b64encode(original[:MAX_REJECTED_RECORD_CHARS]).decode("ascii")
             if original is not None else record.original_base64)
    parsed.rejections.append({
        "row_key": row_key(message_id, index) if index is not None else f"{message_id}:message",
        "message_id": message_id,
        "received_at": received_at,
        "record_index": index,
        "test_id": clean(test_id, 128).text if isinstance(test_id, str) else None,
        "reason": clean(reason, MAX_REASON_CHARS).text,
        "record": record.text,
        "record_base64": exact,
    })


def _validated(raw: Any, model: type[_Model]) -> _Model:
    """``raw`` as a ``model``; _Refused says which field broke which rule."""
    problem = check(raw, RECORD_LIMITS)
    if problem is not None:
        raise _Refused(str(problem) if problem.path else f"record: {problem.rule}")
    if not isinstance(raw, dict):
        raise _Refused("record: must be a JSON object")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise _Refused(format_validation_error(exc)[0]) from exc


def _as_row(record: BaseModel, key: str, message_id: str, received_at: str) -> dict[str, Any]:
    """A validated record as a table row: timestamps in ISO form, plus its keys."""
    row = {name: value.isoformat() if isinstance(value, datetime) else value
           for name, value in record.__dict__.items()}
    row.update(row_key=key, message_id=message_id, ingested_at=received_at)
    return row


# How one record of a message becomes a row: (record, message id, index, received at);
# raises _Refused saying why there is none.
_RowOf = Callable[[Any, str, int, str], dict[str, Any]]


def _row(raw: Any, message_id: str, index: int, received_at: str) -> dict[str, Any]:
    """The requests-table row of one record."""
    return _as_row(_validated(raw, MetricRecord), row_key(message_id, index), message_id,
                   received_at)


def _pool_action_row(raw: Any, message_id: str, index: int, received_at: str,
                     ) -> dict[str, Any]:
    """The pool_actions-table row of one record, keyed by its ``action_id``."""
    record = _validated(raw, PoolActionRecord)
    return _as_row(record, record.action_id, message_id, received_at)


def _job_event_row(raw: Any, message_id: str, index: int, received_at: str,
                   ) -> dict[str, Any]:
    """The job_events-table row of one record, keyed by its ``event_id``."""
    record = _validated(raw, JobEventRecord)
    return _as_row(record, record.event_id, message_id, received_at)


def _decoded(parsed: Parsed, message_id: str, data: bytes, at: str) -> tuple[bool, Any]:
    """``(True, payload)``, or ``(False, None)`` with the message rejected when its data
    is not JSON within :data:`MESSAGE_LIMITS`."""
    try:
        return True, decode_array(data, MESSAGE_LIMITS)
    except PermanentError as exc:
        head = data[:MAX_REJECTED_RECORD_CHARS]
        _reject(parsed, message_id, at, None, exc.message,
                head.decode("utf-8", "replace"), original=head)
        return False, None


def _records(parsed: Parsed, message_id: str, data: bytes, at: str) -> list[Any]:
    """The message's records, or none (with the message rejected) when it has none."""
    readable, payload = _decoded(parsed, message_id, data, at)
    if not readable:
        return []
    records = [payload] if isinstance(payload, dict) else payload
    if not isinstance(records, list):
        _reject(parsed, message_id, at, None,
                "data: must be a JSON array of records or one record object", payload)
        return []
    if len(records) > MESSAGE_LIMITS.max_items:
        _reject(parsed, message_id, at, None,
                f"data: at most {MESSAGE_LIMITS.max_items:,} records per message "
                f"(this one has {len(records):,})", records)
        return []
    return records


def parse_message(message_id: str, data: bytes, received_at: datetime) -> Parsed:
    """Validate every record of one message into rows and rejections (pure).

    Records are isolated: whatever goes wrong with one — a broken rule, or any exception
    while validating or converting it — rejects that record only, with the reason.
    """
    return _parse_records(message_id, data, received_at, _row)


def parse_pool_action_message(message_id: str, data: bytes, received_at: datetime,
                              ) -> Parsed:
    """A pool-action message (attribute ``kind=pool_action``): each record validated on
    its own, exactly as :func:`parse_message` does, into rows keyed by ``action_id``
    (pure). The same action published twice, or redelivered, keeps its key."""
    return _parse_records(message_id, data, received_at, _pool_action_row)


def parse_job_event_message(message_id: str, data: bytes, received_at: datetime,
                            ) -> Parsed:
    """A job-event message (attribute ``kind=job_event``): each record validated on its
    own into rows keyed by ``event_id`` (pure). A transition observed twice, or
    redelivered, keeps its key."""
    return _parse_records(message_id, data, received_at, _job_event_row)


def _parse_records(message_id: str, data: bytes, received_at: datetime,
                   row_of: _RowOf) -> Parsed:
    at = received_at.astimezone(UTC).isoformat()
    parsed = Parsed()
    for index, raw in enumerate(_records(parsed, message_id, data, at)):
        try:
            parsed.rows.append(row_of(raw, message_id, index, at))
        except _Refused as exc:
            _reject(parsed, message_id, at, index, str(exc), raw)
        except Exception as exc:
            # Deliberately broad, and per record: a record is user data, and no
            # exception it provokes may cost the rest of the batch or fail the
            # delivery (which would retry it until it is dead-lettered).
            _reject(parsed, message_id, at, index,
                    f"record could not be processed: {type(exc).__name__}: {exc}", raw)
    return parsed


def parse_run_message(message_id: str, data: bytes, received_at: datetime) -> Parsed:
    """A run message (attribute ``kind=run``): one run record, or its rejection (pure).

    The row key is the test id and phase, so the same record from several workers,
    or redelivered, is one row.
    """
    at = received_at.astimezone(UTC).isoformat()
    parsed = Parsed()
    readable, raw = _decoded(parsed, message_id, data, at)
    if not readable:
        return parsed
    try:
        if not isinstance(raw, dict):
            raise _Refused("data: a run message carries one JSON object")
        record = _validated(raw, RunRecord)
    except _Refused as exc:
        _reject(parsed, message_id, at, None, f"run record: {exc}", raw)
        return parsed
    parsed.rows.append(_as_row(record, run_row_key(record.test_id, record.phase), message_id,
                               at))
    return parsed


# Each kind of message (its ``kind`` attribute; none for request records): how it is
# parsed and the MetricsConfig field naming its table.
_ROUTES: dict[str | None, tuple[Callable[[str, bytes, datetime], Parsed], str]] = {
    None: (parse_message, "table"),
    RUN_KIND: (parse_run_message, "runs_table"),
    POOL_ACTION_KIND: (parse_pool_action_message, "pool_actions_table"),
    JOB_EVENT_KIND: (parse_job_event_message, "job_events_table"),
}


@dataclass(frozen=True, slots=True)
class IngestResult:
    rows: int
    rejected: int
    insert_requests: int


def on_message(message: PubSubMessage) -> IngestResult:
    """The core of ``ingest_metrics`` for one PubSubMessage; see the module docstring.

    Raises TransientError (retry) when the settings are incomplete or BigQuery fails.
    """
    log = get_logger("accelops.metrics")
    settings = Settings.from_env()
    config = load_config_or_retry(settings) if settings.config_source else AccelopsConfig()
    # ConfigError (a DeploymentError): retried until the deployment is fixed.
    settings.require("project")
    assert settings.project is not None
    names = Names.of(settings.project, config.metrics)

    # An unknown kind is read as request records, as before kinds existed.
    parse, table_key = _ROUTES.get(message.attributes.get(KIND_ATTRIBUTE), _ROUTES[None])
    parsed = parse(message.message_id, message.data, datetime.now(UTC))
    table = getattr(config.metrics, table_key)
    requests = store(settings.project, names.ref(table), parsed.rows)
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
