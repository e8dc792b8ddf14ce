"""The BigQuery schema of load-test metrics, as code.

One table of requests (DAY-partitioned on ``start_time``, clustered by test and model)
and one of rejected records, plus views that everything downstream reads:

* ``requests_unique`` — one row per row key. Pub/Sub delivers at least once and a
  redelivered message is inserted again with the same keys; insertIds make BigQuery
  drop most copies, the view drops the rest, so no reader sees a duplicate;
* ``test_summary`` — per test: requests, QPS, error rate, p50/p90/p99, tokens/s;
* ``test_timeseries`` (per minute) and ``test_timeseries_seconds`` (per second, for
  tests too short for a per-minute chart);
* ``test_comparison`` — each test next to the previous test of the same model and
  server, with relative changes.

Latency percentiles are over successful requests: a fast 4xx would otherwise make a
failing run look quick. ``accelops bq init`` applies this idempotently.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from shared.bigquery import Field
from shared.config import MetricsConfig
from shared.errors import ConfigError

__all__ = ["REJECTION_FIELDS", "REQUEST_FIELDS", "TABLES", "VIEWS", "Names", "TableSpec", "View",
           "apply_schema"]

# Project ids, optionally domain-scoped ("example.com:project").
_PROJECT = re.compile(r"^([a-z][-a-z0-9.]{0,62}:)?[a-z][-a-z0-9]{4,61}[a-z0-9]$")

REQUEST_FIELDS: tuple[Field, ...] = (
    Field("row_key", "STRING", "REQUIRED", "<Pub/Sub message id>:<index>; unique per record"),
    Field("message_id", "STRING", "REQUIRED", "the Pub/Sub message that carried the record"),
    Field("ingested_at", "TIMESTAMP", "REQUIRED", "when ingest_metrics wrote the row"),
    Field("test_id", "STRING", "REQUIRED"),
    Field("request_type", "STRING", "REQUIRED", "HTTP method or RPC kind"),
    Field("request_name", "STRING", "REQUIRED", "Locust's request name (usually the path)"),
    Field("response_length", "INT64", "NULLABLE", "bytes"),
    Field("response_time", "FLOAT64", "REQUIRED", "milliseconds, as the client measured"),
    Field("start_time", "TIMESTAMP", "REQUIRED"),
    Field("exception", "STRING", "NULLABLE", "set when the request failed"),
    Field("model_name", "STRING"),
    Field("model_method", "STRING"),
    Field("tokenizer", "STRING"),
    Field("num_input_tokens", "INT64"),
    Field("num_output_tokens", "INT64"),
    Field("model_response_time", "FLOAT64", "NULLABLE", "milliseconds, as the server reported"),
    Field("server", "STRING", "NULLABLE", "triton, saxml, ..."),
    Field("accelerator", "STRING", "NULLABLE", "e.g. v5litepod-8, or cpu"),
    Field("users", "INT64", "NULLABLE", "concurrent load-generator users"),
)

REJECTION_FIELDS: tuple[Field, ...] = (
    Field("row_key", "STRING", "REQUIRED", "<message id>:<index>, or <message id>:message"),
    Field("message_id", "STRING", "REQUIRED"),
    Field("received_at", "TIMESTAMP", "REQUIRED"),
    Field("record_index", "INT64", "NULLABLE", "position in the message; null: whole message"),
    Field("test_id", "STRING", "NULLABLE", "when it could be read"),
    Field("reason", "STRING", "REQUIRED", "which field broke which rule"),
    Field("record", "STRING", "NULLABLE", "the refused record as received (clipped)"),
    Field("record_base64", "STRING", "NULLABLE",
          "the exact original (base64; WTF-8 for text) when `record` had to replace "
          "characters or the data was not UTF-8"),
)


@dataclass(frozen=True, slots=True)
class Names:
    """Fully qualified names, for SQL (backticked) and for the API."""

    project: str
    dataset: str
    table: str
    rejections_table: str

    @classmethod
    def of(cls, project: str, config: MetricsConfig) -> Names:
        """Raises ConfigError for a project id that could not be a Google Cloud one
        (names are interpolated into SQL; the config validates the others)."""
        if not _PROJECT.match(project):
            raise ConfigError(f"{project!r} is not a Google Cloud project id",
                              field="ACCELOPS_PROJECT")
        return cls(project, config.dataset, config.table, config.rejections_table)

    def ref(self, name: str) -> str:
        """``dataset.name``, as the adapter takes it."""
        return f"{self.dataset}.{name}"

    def sql(self, name: str) -> str:
        return f"`{self.project}.{self.dataset}.{name}`"


@dataclass(frozen=True, slots=True)
class TableSpec:
    """A table of the dataset; ``config_key`` is the MetricsConfig field naming it."""

    config_key: str
    fields: tuple[Field, ...]
    partition_field: str
    description: str
    clustering: tuple[str, ...] = ()
    # Whether MetricsConfig.partition_expiration_days applies (rejections are kept).
    expires: bool = False

    def name(self, config: MetricsConfig) -> str:
        return str(getattr(config, self.config_key))


TABLES: tuple[TableSpec, ...] = (
    TableSpec("table", REQUEST_FIELDS, "start_time",
              "one row per load-test request (may hold redelivered copies)",
              clustering=("test_id", "model_name"), expires=True),
    TableSpec("rejections_table", REJECTION_FIELDS, "received_at",
              "load-test records ingest_metrics refused, with the reason"),
)


@dataclass(frozen=True, slots=True)
class View:
    name: str
    description: str
    sql: Callable[[Names], str]


def _unique(n: Names) -> str:
    return f"""SELECT * EXCEPT (_copy) FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY row_key ORDER BY ingested_at) AS _copy
  FROM {n.sql(n.table)}
) WHERE _copy = 1"""


def _quantile(q: int) -> str:
    return (f"APPROX_QUANTILES(IF(exception IS NULL, response_time, NULL), 100)"
            f"[OFFSET({q})] AS p{q}_ms")


def _summary(n: Names) -> str:
    # A test's model is the one most of its requests aimed at (ties: by name), not any
    # one of them: a test that sends some requests to a missing model is still listed,
    # and compared, under the model it tested.
    return f"""WITH models AS (
  SELECT test_id, model_name,
    ROW_NUMBER() OVER (PARTITION BY test_id ORDER BY COUNT(*) DESC, model_name) AS rank
  FROM {n.sql("requests_unique")}
  WHERE model_name IS NOT NULL
  GROUP BY test_id, model_name
), per_test AS (
  SELECT
    test_id,
    ANY_VALUE(server) AS server,
    ANY_VALUE(accelerator) AS accelerator,
    MAX(users) AS users,
    MIN(start_time) AS started,
    MAX(start_time) AS ended,
    COUNT(*) AS requests,
    COUNTIF(exception IS NOT NULL) AS errors,
    {_quantile(50)},
    {_quantile(90)},
    {_quantile(99)},
    IFNULL(SUM(num_input_tokens), 0) AS input_tokens,
    IFNULL(SUM(num_output_tokens), 0) AS output_tokens
  FROM {n.sql("requests_unique")}
  GROUP BY test_id
)
SELECT
  per_test.*,
  models.model_name,
  GREATEST(TIMESTAMP_DIFF(ended, started, MILLISECOND) / 1000.0, 1.0) AS duration_s,
  SAFE_DIVIDE(errors, requests) AS error_rate,
  requests / GREATEST(TIMESTAMP_DIFF(ended, started, MILLISECOND) / 1000.0, 1.0) AS qps,
  output_tokens / GREATEST(TIMESTAMP_DIFF(ended, started, MILLISECOND) / 1000.0, 1.0)
    AS tokens_per_s
FROM per_test LEFT JOIN models ON models.test_id = per_test.test_id AND models.rank = 1"""


def _series(unit: str, seconds: float) -> Callable[[Names], str]:
    def sql(n: Names) -> str:
        return f"""WITH bucketed AS (
  SELECT
    *,
    TIMESTAMP_TRUNC(start_time, {unit}) AS bucket,
    TIMESTAMP_TRUNC(MIN(start_time) OVER (PARTITION BY test_id), {unit}) AS first_bucket
  FROM {n.sql("requests_unique")}
)
SELECT
  test_id,
  bucket,
  TIMESTAMP_DIFF(bucket, ANY_VALUE(first_bucket), SECOND) AS offset_s,
  COUNT(*) AS requests,
  COUNTIF(exception IS NOT NULL) AS errors,
  COUNT(*) / {seconds} AS qps,
  {_quantile(50)},
  {_quantile(90)},
  {_quantile(99)},
  IFNULL(SUM(num_output_tokens), 0) / {seconds} AS tokens_per_s
FROM bucketed
GROUP BY test_id, bucket"""
    return sql


def _change(field: str) -> str:
    previous = f"LAG({field}) OVER (PARTITION BY model_name, server ORDER BY started)"
    return f"SAFE_DIVIDE({field} - {previous}, {previous}) AS {field}_change"


def _comparison(n: Names) -> str:
    return f"""SELECT
  test_id, model_name, server, accelerator, users, started, requests, qps, error_rate,
  p50_ms, p90_ms, p99_ms, tokens_per_s,
  LAG(test_id) OVER (PARTITION BY model_name, server ORDER BY started) AS previous_test_id,
  {_change("qps")},
  {_change("p50_ms")},
  {_change("p99_ms")},
  {_change("tokens_per_s")},
  error_rate - LAG(error_rate) OVER (PARTITION BY model_name, server ORDER BY started)
    AS error_rate_delta
FROM {n.sql("test_summary")}"""


# In dependency order: each view reads only the table or views before it.
VIEWS: tuple[View, ...] = (
    View("requests_unique", "requests, one row per row key (redeliveries removed)", _unique),
    View("test_summary", "per test: requests, QPS, error rate, latency percentiles, tokens/s",
         _summary),
    View("test_timeseries", "per test and minute", _series("MINUTE", 60.0)),
    View("test_timeseries_seconds", "per test and second", _series("SECOND", 1.0)),
    View("test_comparison", "each test next to the previous one of the same model and server",
         _comparison),
)


def apply_schema(project: str, config: MetricsConfig,
                 progress: Callable[[str], None] = lambda line: None) -> dict[str, str]:
    """Create or update the dataset, tables and views; returns what happened to each.

    Idempotent: a second run reports everything "unchanged". Raises the adapter's
    domain errors (UnavailableError when BigQuery cannot be reached).
    """
    from shared import bigquery as bq

    names = Names.of(project, config)
    outcome: dict[str, str] = {}

    def record(name: str, result: str) -> None:
        outcome[name] = result
        progress(f"{result:<9} {project}.{name}")

    record(names.dataset, bq.ensure_dataset(project, names.dataset, config.location))
    for spec in TABLES:
        name = names.ref(spec.name(config))
        record(name, bq.ensure_table(
            project, name, spec.fields, partition_field=spec.partition_field,
            clustering=spec.clustering, description=spec.description,
            partition_expiration_days=config.partition_expiration_days if spec.expires else None))
    for view in VIEWS:
        record(names.ref(view.name),
               bq.ensure_view(project, names.ref(view.name), view.sql(names), view.description))
    return outcome
