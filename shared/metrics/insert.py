"""Rows into BigQuery: insert requests of at most 500 rows and well under 10 MB.

``ingest_metrics`` writes every kind of row (requests, runs, pool actions, rejections)
through :func:`store`, keyed by each row's ``row_key``, which also becomes its insertId.
Sizing (:func:`row_size`, :func:`insert_batches`) is pure; :func:`store` is the I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from shared import bigquery as bq
from shared.metrics.batch import split

__all__ = ["MAX_INSERT_BYTES", "MAX_INSERT_ROWS", "insert_batches", "row_size", "store"]

MAX_INSERT_ROWS = 500
# BigQuery refuses insertAll requests over 10 MB; stay clear of it with the envelope.
MAX_INSERT_BYTES = 9_000_000


def _text_cost(text: str) -> int:
    n = len(text)
    return n + 2 if text.isascii() and text.isprintable() else 12 * n + 2


def row_size(row: Mapping[str, Any]) -> int:
    """An upper bound of the row's size in the insert request's JSON.

    Cheaper than encoding twice: printable ASCII costs its length; any other text is
    counted as if every character were escaped (``\\uXXXX``, 12 bytes for a surrogate
    pair); a list is encoded, being the bulk of a streamed request's row. The row's
    ``row_key`` is counted twice, as it is also the insertId.
    """
    size = 32 + _text_cost(str(row.get("row_key", "")))  # {"insertId": ..., "json": {}}
    for key, value in row.items():
        size += _text_cost(key) + 4
        size += _value_cost(value)
    return size


def _value_cost(value: Any) -> int:
    if isinstance(value, str):
        return _text_cost(value)
    if isinstance(value, list):
        # A REPEATED column (inter-token latencies: up to 2,048 numbers) is what most of
        # a streamed row weighs: measured exactly, as the client will encode it.
        return len(json.dumps(value))
    return 24


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
    requests = 0
    for batch in insert_batches(rows):
        bq.insert_rows(project, table, batch, [row["row_key"] for row in batch])
        requests += 1
    return requests
