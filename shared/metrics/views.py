"""Reading the metrics views: the :class:`MetricsSource` behind reports and the dashboard."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from shared.errors import NotFoundError
from shared.metrics.model import SeriesPoint, TestSummary
from shared.metrics.schema import Names

__all__ = ["BigQueryMetrics"]

_SERIES_VIEWS = {"second": "test_timeseries_seconds", "minute": "test_timeseries"}


def _float(value: Any) -> float:
    # Percentiles are NULL when every request of a bucket failed.
    return 0.0 if value is None else float(value)


def _summary(row: dict[str, Any]) -> TestSummary:
    started: datetime = row["started"]
    ended: datetime = row["ended"]
    return TestSummary(
        test_id=row["test_id"], model_name=row["model_name"], server=row["server"],
        accelerator=row["accelerator"], users=row["users"], started=started, ended=ended,
        duration_s=_float(row["duration_s"]), requests=int(row["requests"]),
        errors=int(row["errors"]), error_rate=_float(row["error_rate"]),
        qps=_float(row["qps"]), p50_ms=_float(row["p50_ms"]), p90_ms=_float(row["p90_ms"]),
        p99_ms=_float(row["p99_ms"]), input_tokens=int(row["input_tokens"] or 0),
        output_tokens=int(row["output_tokens"] or 0),
        tokens_per_s=_float(row["tokens_per_s"]))


class BigQueryMetrics:
    """The views of one dataset, read with parameterised queries."""

    def __init__(self, names: Names) -> None:
        self.names = names

    @classmethod
    def from_env(cls) -> BigQueryMetrics:
        """From ``ACCELOPS_PROJECT`` and the config's ``metrics`` section.

        Raises ConfigError when ``ACCELOPS_PROJECT`` is unset.
        """
        from shared.config import AccelopsConfig, Settings, load_config

        settings = Settings.from_env()
        settings.require("project")
        assert settings.project is not None
        config = load_config(settings.config_source) if settings.config_source else (
            AccelopsConfig())
        return cls(Names.of(settings.project, config.metrics))

    def _query(self, sql: str, **params: Any) -> list[dict[str, Any]]:
        from shared import bigquery

        return bigquery.query(self.names.project, sql, params)

    def summary(self, test_id: str) -> TestSummary:
        rows = self._query(f"SELECT * FROM {self.names.sql('test_summary')} "
                           "WHERE test_id = @test_id", test_id=test_id)
        if not rows:
            raise NotFoundError(f"no load test {test_id!r} in "
                                f"{self.names.project}.{self.names.dataset}")
        return _summary(rows[0])

    def series(self, test_id: str, *, per: Literal["second", "minute"]) -> list[SeriesPoint]:
        rows = self._query(f"SELECT * FROM {self.names.sql(_SERIES_VIEWS[per])} "
                           "WHERE test_id = @test_id ORDER BY bucket", test_id=test_id)
        return [SeriesPoint(
            test_id=row["test_id"], bucket=row["bucket"], offset_s=_float(row["offset_s"]),
            requests=int(row["requests"]), errors=int(row["errors"]), qps=_float(row["qps"]),
            p50_ms=_float(row["p50_ms"]), p90_ms=_float(row["p90_ms"]),
            p99_ms=_float(row["p99_ms"]), tokens_per_s=_float(row["tokens_per_s"]))
            for row in rows]

    def recent_tests(self, limit: int = 50) -> list[TestSummary]:
        rows = self._query(f"SELECT * FROM {self.names.sql('test_summary')} "
                           "ORDER BY started DESC LIMIT @limit", limit=limit)
        return [_summary(row) for row in rows]
