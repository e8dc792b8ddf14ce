"""The metrics dataset's fully qualified names, for SQL (backticked) and for the API:
what every table, view and reader of the dataset names, below all of them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared.config import AccelopsConfig, MetricsConfig, Settings, load_config
from shared.errors import ConfigError

__all__ = ["Names", "names_from_env"]

# Project ids, optionally domain-scoped ("example.com:project").
_PROJECT = re.compile(r"^([a-z][-a-z0-9.]{0,62}:)?[a-z][-a-z0-9]{4,61}[a-z0-9]$")


@dataclass(frozen=True, slots=True)
class Names:
    """Fully qualified names, for SQL (backticked) and for the API."""

    project: str
    dataset: str
    table: str
    rejections_table: str
    runs_table: str
    pool_actions_table: str
    job_events_table: str

    @classmethod
    def of(cls, project: str, config: MetricsConfig) -> Names:
        """Raises ConfigError for a project id that could not be a Google Cloud one
        (names are interpolated into SQL; the config validates the others)."""
        if not _PROJECT.match(project):
            raise ConfigError(f"{project!r} is not a Google Cloud project id",
                              field="ACCELOPS_PROJECT")
        return cls(project, config.dataset, config.table, config.rejections_table,
                   config.runs_table, config.pool_actions_table, config.job_events_table)

    def ref(self, name: str) -> str:
        """``dataset.name``, as the adapter takes it."""
        return f"{self.dataset}.{name}"

    def sql(self, name: str) -> str:
        return f"`{self.project}.{self.dataset}.{name}`"


def names_from_env() -> Names:
    """The dataset's names from ``ACCELOPS_PROJECT`` and the config's ``metrics`` section.

    Raises ConfigError when ``ACCELOPS_PROJECT`` is unset.
    """
    settings = Settings.from_env()
    settings.require("project")
    assert settings.project is not None
    config = load_config(settings.config_source) if settings.config_source else (
        AccelopsConfig())
    return Names.of(settings.project, config.metrics)
