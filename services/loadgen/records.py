"""From one Locust request event to one metric record, and from records to a message.

Locust fires ``events.request`` with keyword arguments (``request_type``, ``name``,
``response_time`` in ms, ``response_length``, ``start_time`` in epoch seconds,
``exception``, ``context``). The user classes put what only they know (model, token
counts, server-reported time, time to first token, time per output token,
inter-token latencies) into ``context``; this module adds
the run metadata and produces a dict with exactly
:class:`~shared.metrics.record.MetricRecord`'s fields. (What describes the whole run,
published once per test, is built in :mod:`services.loadgen.runs`.)

Building is pure and forgiving: an odd value (a negative time, an over-long name) is
clamped rather than raised, because losing a record of a failed request is worse than
recording it approximately. The ingest side validates every record again.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.metrics.record import MAX_EXCEPTION_CHARS, MAX_INTER_TOKEN_LATENCIES

__all__ = [
    "MESSAGE_DATA_LIMIT",
    "RunInfo",
    "Slos",
    "build_record",
    "describe_exception",
    "encode_record",
    "message_attributes",
    "message_data",
    "record_size",
]

# Pub/Sub accepts 10 MB per message; the rest is headroom for attributes and framing.
MESSAGE_DATA_LIMIT = 9_000_000
_SHORT = 256
_NAME = 1024
_MAX_MILLIS = 86_400_000.0
_MAX_COUNT = 10**9


@dataclass(frozen=True, slots=True)
class Slos:
    """The test's service-level objectives in ms (``--slo-*-ms``); None: not given."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    latency_ms: float | None = None


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What is the same on every record of a run."""

    test_id: str
    server: str
    model: str
    accelerator: str | None
    slos: Slos = Slos()
    # The worker's Locust client id (host name and a random suffix) in a distributed
    # run; None in a single process.
    worker: str | None = None


def _text(value: Any, limit: int) -> str:
    return ("" if value is None else str(value))[:limit]


def _optional_text(value: Any) -> str | None:
    return None if value is None else str(value)[:_SHORT]


def _millis(value: Any) -> float | None:
    try:
        millis = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(millis):
        return None
    return min(max(millis, 0.0), _MAX_MILLIS)


def _count(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        count = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return min(max(count, 0), _MAX_COUNT)


def _latencies(values: Any) -> list[float]:
    """The inter-token latencies as the record keeps them: at most
    ``MAX_INTER_TOKEN_LATENCIES``, each to the microsecond (a gap of 12.345678901 ms
    costs 18 bytes of JSON, 12.346 six), unreadable ones dropped."""
    if not isinstance(values, list | tuple):
        return []
    kept = (_millis(v) for v in values[:MAX_INTER_TOKEN_LATENCIES])
    return [round(v, 3) for v in kept if v is not None]


def describe_exception(exception: Any) -> str | None:
    """``"Type: message"`` for an exception, the text for a string, None for success."""
    if exception is None:
        return None
    if isinstance(exception, BaseException):
        message = str(exception)
        text = f"{type(exception).__name__}: {message}" if message else type(exception).__name__
    else:
        text = str(exception) or "error"
    return text[:MAX_EXCEPTION_CHARS]


def build_record(event: Mapping[str, Any], run: RunInfo, users: int | None,
                 clock: Callable[[], float] = time.time) -> dict[str, Any]:
    """The record of one request event (the keyword arguments of ``events.request``)."""
    context: Mapping[str, Any] = event.get("context") or {}
    response_time = _millis(event.get("response_time")) or 0.0
    start = event.get("start_time")
    if isinstance(start, bool) or not isinstance(start, int | float) or not math.isfinite(start):
        # Locust always passes it; a custom client might not.
        start = clock() - response_time / 1000.0
    return {
        "test_id": run.test_id,
        "request_type": _text(event.get("request_type"), _SHORT),
        "request_name": _text(event.get("name"), _NAME),
        "response_length": _count(event.get("response_length")) or 0,
        "response_time": response_time,
        "start_time": float(start),
        "exception": describe_exception(event.get("exception")),
        "model_name": _optional_text(context.get("model_name", run.model)),
        "model_method": _optional_text(context.get("model_method")),
        "tokenizer": _optional_text(context.get("tokenizer")),
        "num_input_tokens": _count(context.get("num_input_tokens")),
        "num_output_tokens": _count(context.get("num_output_tokens")),
        "model_response_time": _millis(context.get("model_response_time")),
        "time_to_first_token": _millis(context.get("time_to_first_token")),
        "server": run.server,
        "accelerator": run.accelerator,
        "users": _count(users),
        "time_per_output_token": _millis(context.get("time_per_output_token")),
        "inter_token_latencies": _latencies(context.get("inter_token_latencies")),
        "worker": _optional_text(run.worker),
    }


def encode_record(record: Mapping[str, Any]) -> bytes:
    """Compact UTF-8 JSON of one record."""
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def record_size(encoded: bytes) -> int:
    """What one encoded record adds to a message: itself and a separator."""
    return len(encoded) + 1


def message_data(encoded: Sequence[bytes]) -> bytes:
    """A message body: the JSON array of the encoded records.

    Its length is ``sum(record_size(r)) + 1``, so batches bounded by
    ``MESSAGE_DATA_LIMIT - 1`` make bodies of at most ``MESSAGE_DATA_LIMIT`` bytes.
    """
    return b"[" + b",".join(encoded) + b"]"


def message_attributes(test_id: str, count: int) -> dict[str, str]:
    """Attributes that let a subscriber filter or count without parsing the body."""
    return {"test_id": test_id, "records": str(count)}
