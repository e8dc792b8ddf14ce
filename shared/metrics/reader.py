"""What every reader of one metrics dataset shares: its names, a count of the queries it
ran (the benchmarks and the API-cost tests read it), and parameterised queries only."""

from __future__ import annotations

from typing import Any, Self

from shared import bigquery
from shared.metrics.names import Names, names_from_env

__all__ = ["DatasetReader"]


class DatasetReader:
    """A dataset's views, read with parameterised queries; ``queries`` counts them."""

    def __init__(self, names: Names) -> None:
        self.names = names
        self.queries = 0

    @classmethod
    def from_env(cls) -> Self:
        """From ``ACCELOPS_PROJECT`` and the config's ``metrics`` section.

        Raises ConfigError when ``ACCELOPS_PROJECT`` is unset.
        """
        return cls(names_from_env())

    def _rows(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        self.queries += 1
        return bigquery.query(self.names.project, sql, params)
