"""Reading the metrics views: the :class:`MetricsSource` behind reports and the dashboard.

Every method is one parameterised query of one view, for all the tests asked for at
once (``test_id IN UNNEST(@ids)``): a compared report costs one query per view, not
one per view and test. ``queries`` counts what this source has sent, for benchmarks
and for the dashboard's own tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any, Literal, TypeVar

from shared.errors import NotFoundError
from shared.metrics.loadtest.model import (
    BaselineChoice,
    Baselines,
    Failure,
    RequestStats,
    SeriesPoint,
    TestSummary,
)
from shared.metrics.reader import DatasetReader

__all__ = ["BigQueryMetrics"]

_SERIES_VIEWS = {"second": "test_timeseries_seconds", "minute": "test_timeseries"}
_Row = TypeVar("_Row", TestSummary, SeriesPoint, RequestStats, Failure)


def _typed(cls: type[_Row], row: dict[str, Any]) -> _Row:
    """The dataclass ``cls`` from a view row: its fields by name, the rest ignored.

    BigQuery answers INT64 as int and FLOAT64 as float already; only the NULLs that a
    dataclass field does not allow are replaced (0 for counts and rates).
    """
    values: dict[str, Any] = {}
    for field in fields(cls):
        if field.name not in row:
            continue
        value = row[field.name]
        if value is None and "None" not in str(field.type):
            value = False if field.type == "bool" else 0
        values[field.name] = value
    return cls(**values)


class BigQueryMetrics(DatasetReader):
    """The views of one dataset, read with parameterised queries."""

    def _query(self, sql: str, **params: Any) -> list[dict[str, Any]]:
        return self._rows(sql, params)

    def _of_tests(self, view: str, test_ids: Sequence[str], order: str) -> list[dict[str, Any]]:
        if not test_ids:
            return []
        return self._query(f"SELECT * FROM {self.names.sql(view)} "
                           f"WHERE test_id IN UNNEST(@ids) ORDER BY {order}",
                           ids=sorted(set(test_ids)))

    def summaries(self, test_ids: Sequence[str]) -> dict[str, TestSummary]:
        rows = self._of_tests("test_summary", test_ids, "test_id")
        return {row["test_id"]: _typed(TestSummary, row) for row in rows}

    def summary(self, test_id: str) -> TestSummary:
        found = self.summaries([test_id]).get(test_id)
        if found is None:
            raise NotFoundError(f"no load test {test_id!r} in "
                                f"{self.names.project}.{self.names.dataset}")
        return found

    def series(self, test_ids: Sequence[str], *,
               per: Literal["second", "minute"]) -> dict[str, list[SeriesPoint]]:
        rows = self._of_tests(_SERIES_VIEWS[per], test_ids, "test_id, bucket")
        return _grouped(SeriesPoint, rows)

    def request_stats(self, test_ids: Sequence[str]) -> dict[str, list[RequestStats]]:
        rows = self._of_tests("test_requests_by_name", test_ids,
                              "test_id, requests DESC, request_type, request_name")
        return _grouped(RequestStats, rows)

    def failures(self, test_ids: Sequence[str]) -> dict[str, list[Failure]]:
        rows = self._of_tests("test_failures", test_ids,
                              "test_id, occurrences DESC, request_name, message")
        return _grouped(Failure, rows)

    def baselines(self, test_id: str, limit: int = 50) -> Baselines:
        # One scan of the view: the test's own row is found with window functions
        # rather than a self-join, which would compute test_summary twice.
        rows = self._query(f"""SELECT
  test_id, model_name, server, started, default_baseline,
  IFNULL(model_name = this_model AND server = this_server, FALSE) AS alike
FROM (
  SELECT
    test_id, model_name, server, started,
    MAX(IF(test_id = @test_id, previous_test_id, NULL)) OVER () AS default_baseline,
    MAX(IF(test_id = @test_id, model_name, NULL)) OVER () AS this_model,
    MAX(IF(test_id = @test_id, server, NULL)) OVER () AS this_server
  FROM {self.names.sql("test_comparison")}
)
WHERE test_id != @test_id
ORDER BY alike DESC, started DESC, test_id
LIMIT @limit""", test_id=test_id, limit=limit)
        default = rows[0]["default_baseline"] if rows else None
        return Baselines(default, tuple(BaselineChoice(
            row["test_id"], row["model_name"], row["server"], row["started"],
            alike=bool(row["alike"])) for row in rows))

    def recent_tests(self, limit: int = 50) -> list[TestSummary]:
        rows = self._query(f"SELECT * FROM {self.names.sql('test_summary')} "
                           "ORDER BY started DESC, test_id LIMIT @limit", limit=limit)
        return [_typed(TestSummary, row) for row in rows]


def _grouped(cls: type[_Row], rows: list[dict[str, Any]]) -> dict[str, list[_Row]]:
    grouped: dict[str, list[_Row]] = {}
    for row in rows:
        grouped.setdefault(row["test_id"], []).append(_typed(cls, row))
    return grouped
