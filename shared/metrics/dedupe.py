"""One row per row key: Pub/Sub delivers at least once and a redelivered message is
inserted again with the same keys; insertIds make BigQuery drop most copies, the
views built on this the rest."""

from __future__ import annotations

__all__ = ["first_copy"]


def first_copy(table: str) -> str:
    """Each row key once: the first copy ingested (redeliveries carry the same key)."""
    return f"""SELECT * EXCEPT (_copy) FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY row_key ORDER BY ingested_at) AS _copy
  FROM {table}
) WHERE _copy = 1"""
