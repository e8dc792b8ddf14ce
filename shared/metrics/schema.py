"""The BigQuery schema of load-test metrics, as code.

Five tables: requests (one row per load-test request, DAY-partitioned on
``start_time``, clustered by test and model), rejected records, test runs (what the
load generator was asked to do, once per test and phase: :mod:`shared.metrics.run`),
pool actions (what ``pool_schedule`` did to a node pool:
:mod:`shared.metrics.pool_action`) and job events (one transition in a job's life:
:mod:`shared.metrics.job_event`). Views, which everything downstream reads:

* ``requests_unique`` and ``test_runs_unique`` — one row per row key (and one run per
  test). Pub/Sub delivers at least once and a redelivered message is inserted again
  with the same keys; insertIds make BigQuery drop most copies, the views the rest;
* ``test_summary`` — per test: run metadata, requests, QPS and success QPS, error rate,
  exact p50/p90/p99, time to first token, tokens/s;
* ``test_timeseries`` (per minute) and ``test_timeseries_seconds`` (per second), with
  the partial first and last buckets marked;
* ``test_requests_by_name`` and ``test_failures`` — Locust's statistics and failures
  tables;
* ``test_comparison`` — each test next to the previous test of the same model and
  server, with changes (error rate in percentage points);
* ``pool_actions_unique`` and ``pool_savings_daily`` — node-pool actions once per
  action id, and the accelerator-hours their removals saved per UTC day and pool
  (:mod:`shared.metrics.savings.sql`);
* ``job_events_unique``, ``job_lifecycle`` and ``job_usage_daily`` — job lifecycle
  events once per event id, each job's durations and chip-hours, and their sums per
  UTC day, team and TPU type (:mod:`shared.metrics.usage.sql`).

Percentiles are exact (PERCENTILE_CONT), not APPROX_QUANTILES: the sandbox's BigQuery
emulator indexes ``APPROX_QUANTILES(...)[OFFSET(k)]`` one too far, and real BigQuery's
approximation is not what a report should print. Latency percentiles are over
successful requests: a fast 4xx would otherwise make a failing run look quick.
``accelops bq init`` applies this idempotently.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from shared.bigquery import Field
from shared.config import MetricsConfig
from shared.errors import ConfigError
from shared.metrics.savings.sql import POOL_ACTIONS_UNIQUE, POOL_SAVINGS_DAILY, pool_savings_daily
from shared.metrics.usage.sql import (
    JOB_EVENTS_UNIQUE,
    JOB_LIFECYCLE,
    JOB_USAGE_DAILY,
    job_lifecycle,
    job_usage_daily,
)

__all__ = ["JOB_EVENT_FIELDS", "POOL_ACTION_FIELDS", "REJECTION_FIELDS", "REQUEST_FIELDS",
           "RUN_FIELDS", "TABLES", "VIEWS", "Names", "TableSpec", "View", "apply_schema"]

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
    Field("time_to_first_token", "FLOAT64", "NULLABLE",
          "milliseconds to the first streamed token; streamed requests only"),
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


RUN_FIELDS: tuple[Field, ...] = (
    Field("row_key", "STRING", "REQUIRED", "<test id>:<phase>; the same from every worker"),
    Field("message_id", "STRING", "REQUIRED", "the Pub/Sub message that carried the record"),
    Field("ingested_at", "TIMESTAMP", "REQUIRED", "when ingest_metrics wrote the row"),
    Field("test_id", "STRING", "REQUIRED"),
    Field("phase", "STRING", "REQUIRED", "start or stop"),
    Field("at", "TIMESTAMP", "REQUIRED", "when the test started or stopped"),
    Field("model_name", "STRING", "NULLABLE", "the model the test targets"),
    Field("server", "STRING", "NULLABLE", "triton, saxml, ..."),
    Field("accelerator", "STRING", "NULLABLE", "e.g. v5litepod-8, nvidia-l4, or cpu"),
    Field("users", "INT64", "NULLABLE", "users asked for (--users), all workers"),
    Field("spawn_rate", "FLOAT64", "NULLABLE", "users started per second"),
    Field("run_time_s", "FLOAT64", "NULLABLE", "--run-time; null: until stopped"),
    Field("locust_version", "STRING"),
    Field("loadgen_revision", "STRING", "NULLABLE", "git revision of the load generator"),
    Field("host", "STRING", "NULLABLE", "the target (--host), without credentials"),
)


POOL_ACTION_FIELDS: tuple[Field, ...] = (
    Field("row_key", "STRING", "REQUIRED", "the action id; the same for a re-published action"),
    Field("message_id", "STRING", "REQUIRED", "the Pub/Sub message that carried the record"),
    Field("ingested_at", "TIMESTAMP", "REQUIRED", "when ingest_metrics wrote the row"),
    Field("action_id", "STRING", "REQUIRED", "chosen by pool_schedule: pool, action, tick"),
    Field("at", "TIMESTAMP", "REQUIRED", "when the action was taken"),
    Field("project", "STRING", "REQUIRED"),
    Field("location", "STRING", "REQUIRED"),
    Field("cluster", "STRING", "REQUIRED"),
    Field("pool", "STRING", "REQUIRED", "the node pool"),
    Field("action", "STRING", "REQUIRED", "remove, restore, or skip (left up: busy)"),
    Field("method", "STRING", "NULLABLE", "resize, delete or recreate; null for a skip"),
    Field("reason", "STRING", "REQUIRED", "why pool_schedule did it"),
    Field("accelerator_type", "STRING", "NULLABLE", "e.g. tpu-v5-lite-podslice, nvidia-l4"),
    Field("accelerator_count", "INT64", "REQUIRED",
          "accelerators (TPU chips or GPUs) the pool holds when it is up"),
    Field("schedule", "STRING", "NULLABLE", "the schedule that asked for it"),
    Field("team", "STRING", "NULLABLE", "the team the pool belongs to"),
    Field("forced", "BOOL", "REQUIRED", "removed although busy, or restored off schedule"),
)


JOB_EVENT_FIELDS: tuple[Field, ...] = (
    Field("row_key", "STRING", "REQUIRED", "the event id; the same for a re-published event"),
    Field("message_id", "STRING", "REQUIRED", "the Pub/Sub message that carried the record"),
    Field("ingested_at", "TIMESTAMP", "REQUIRED", "when ingest_metrics wrote the row"),
    Field("event_id", "STRING", "REQUIRED", "request id, event and slice index"),
    Field("event", "STRING", "REQUIRED",
          "submitted, rejected, admitted, slice_requested, slice_ready, running, finished "
          "or slice_deleted"),
    Field("at", "TIMESTAMP", "REQUIRED", "when the transition happened"),
    Field("request_id", "STRING", "REQUIRED", "the job request's id"),
    Field("team", "STRING", "NULLABLE", "the team the request named"),
    Field("jobset", "STRING", "NULLABLE", "namespace/name of the JobSet"),
    Field("tpu_type", "STRING", "NULLABLE", "e.g. v5litepod-16"),
    Field("slices", "INT64", "NULLABLE", "slices the job runs on"),
    Field("chips_per_slice", "INT64", "NULLABLE", "TPU chips of one slice"),
    Field("slice_index", "INT64", "NULLABLE", "per-slice events: which slice"),
    Field("pool", "STRING", "NULLABLE", "per-slice events: the node pool"),
    Field("outcome", "STRING", "NULLABLE", "finished: succeeded, failed or cancelled"),
    Field("reason", "STRING", "NULLABLE", "finished or rejected: why, in words"),
    Field("field", "STRING", "NULLABLE", "rejected: the request field"),
    Field("rule", "STRING", "NULLABLE", "rejected: the rule it broke"),
)


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
    TableSpec("runs_table", RUN_FIELDS, "at",
              "one row per load test and phase: what the load generator was asked to do",
              clustering=("test_id",)),
    TableSpec("pool_actions_table", POOL_ACTION_FIELDS, "at",
              "one row per action pool_schedule took (or declined) on a node pool "
              "(may hold redelivered copies)", clustering=("cluster", "pool")),
    TableSpec("job_events_table", JOB_EVENT_FIELDS, "at",
              "one row per transition in a job's life (may hold redelivered copies)",
              clustering=("team", "request_id")),
)


@dataclass(frozen=True, slots=True)
class View:
    name: str
    description: str
    sql: Callable[[Names], str]


def _first_copy(table: str) -> str:
    """Each row key once: the first copy ingested (redeliveries carry the same key)."""
    return f"""SELECT * EXCEPT (_copy) FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY row_key ORDER BY ingested_at) AS _copy
  FROM {table}
) WHERE _copy = 1"""


def _unique(n: Names) -> str:
    return _first_copy(n.sql(n.table))


def _runs(n: Names) -> str:
    # A test's start record says what was asked for; its stop record when it ended.
    # Either may be missing (a crashed load generator, a lost message): the other
    # still describes the run.
    return f"""WITH unique_runs AS (
{_first_copy(n.sql(n.runs_table))}
), starts AS (
  SELECT * FROM unique_runs WHERE phase = 'start'
), stops AS (
  SELECT * FROM unique_runs WHERE phase = 'stop'
)
SELECT
  COALESCE(starts.test_id, stops.test_id) AS test_id,
{_coalesced("starts", "stops", _RUN_DESCRIPTION)},
  starts.at AS run_started,
  stops.at AS run_stopped
FROM starts FULL OUTER JOIN stops ON starts.test_id = stops.test_id"""


_RUN_DESCRIPTION = ("model_name", "server", "accelerator", "users", "spawn_rate", "run_time_s",
                    "locust_version", "loadgen_revision", "host")


def _coalesced(first: str, second: str, fields: tuple[str, ...]) -> str:
    return ",\n".join(f"  COALESCE({first}.{f}, {second}.{f}) AS {f}" for f in fields)


# Exact percentiles: PERCENTILE_CONT (linear interpolation between the closest ranks,
# what numpy and statistics.quantiles(method="inclusive") compute). BigQuery has it
# only as an analytic function, so it is computed per row over the window and picked
# up with ANY_VALUE when grouping. Latency is over successful requests only (a fast
# 404 would make a failing run look quick); NULLs, i.e. failures, are ignored.
# (column, measured value, fraction): latency of successful requests and time to first
# token of streamed ones.
_Percentile = tuple[str, str, float]
_LATENCY: tuple[_Percentile, ...] = (
    ("p50_ms", "ok_ms", 0.5), ("p90_ms", "ok_ms", 0.9), ("p99_ms", "ok_ms", 0.99))
_TTFT: tuple[_Percentile, ...] = (("ttft_p50_ms", "ttft_ms", 0.5), ("ttft_p90_ms", "ttft_ms", 0.9))


def _percentiles(window: str, columns: tuple[_Percentile, ...]) -> str:
    """The window percentiles named in ``columns``, computed on every row."""
    return ",\n    ".join(f"PERCENTILE_CONT({value}, {q}) OVER ({window}) AS {column}"
                           for column, value, q in columns)


def _picked(columns: tuple[_Percentile, ...]) -> str:
    """The window percentiles of :func:`_percentiles`, one value per group."""
    return ",\n    ".join(f"ANY_VALUE({column}) AS {column}" for column, _, _ in columns)


def _measured(n: Names) -> str:
    """The unique requests, with what every aggregate needs: latency and time to first
    token of successful requests (NULL for failures) and when each response ended."""
    return f"""SELECT
    *,
    IF(exception IS NULL, response_time, NULL) AS ok_ms,
    IF(exception IS NULL, time_to_first_token, NULL) AS ttft_ms,
    TIMESTAMP_ADD(start_time, INTERVAL CAST(response_time * 1000 AS INT64) MICROSECOND)
      AS end_time
  FROM {n.sql("requests_unique")}"""


def _summary(n: Names) -> str:
    # The model, server and accelerator come from the run record. Without one (an
    # older load generator) the model is the one most requests named, and the row
    # says so (model_inferred); a test whose requests named several models is
    # flagged either way (model_count > 1), and never paired with a baseline.
    return f"""WITH measured AS (
  {_measured(n)}
), with_percentiles AS (
  SELECT *, {_percentiles("PARTITION BY test_id", _LATENCY + _TTFT)}
  FROM measured
), request_models AS (
  SELECT test_id, model_name, COUNT(*) AS requests,
    ROW_NUMBER() OVER (PARTITION BY test_id ORDER BY COUNT(*) DESC, model_name) AS rank
  FROM measured
  WHERE model_name IS NOT NULL
  GROUP BY test_id, model_name
), model_sets AS (
  SELECT test_id, COUNT(*) AS model_count,
    STRING_AGG(model_name, ', ' ORDER BY requests DESC, model_name) AS models_seen
  FROM request_models
  GROUP BY test_id
), per_test AS (
  SELECT
    test_id,
    ANY_VALUE(server) AS request_server,
    ANY_VALUE(accelerator) AS request_accelerator,
    MAX(users) AS max_users,
    MIN(start_time) AS first_request,
    MAX(end_time) AS last_response,
    COUNT(*) AS requests,
    COUNTIF(exception IS NOT NULL) AS errors,
    {_picked(_LATENCY + _TTFT)},
    MAX(ok_ms) AS max_ms,
    AVG(ok_ms) AS mean_ms,
    IFNULL(SUM(num_input_tokens), 0) AS input_tokens,
    IFNULL(SUM(num_output_tokens), 0) AS output_tokens
  FROM with_percentiles
  GROUP BY test_id
), timed AS (
  SELECT
    per_test.*,
    runs.* EXCEPT (test_id, model_name, server, accelerator, users),
    COALESCE(runs.model_name, request_models.model_name) AS model_name,
    runs.model_name IS NULL AS model_inferred,
    IFNULL(model_sets.model_count, 0) AS model_count,
    model_sets.models_seen,
    COALESCE(runs.server, per_test.request_server) AS server,
    COALESCE(runs.accelerator, per_test.request_accelerator) AS accelerator,
    COALESCE(runs.users, per_test.max_users) AS users,
    COALESCE(runs.run_started, per_test.first_request) AS started,
    COALESCE(runs.run_stopped, per_test.last_response) AS ended,
    runs.run_stopped IS NOT NULL AS finished
  FROM per_test
  LEFT JOIN {n.sql("test_runs_unique")} AS runs ON runs.test_id = per_test.test_id
  LEFT JOIN request_models
    ON request_models.test_id = per_test.test_id AND request_models.rank = 1
  LEFT JOIN model_sets ON model_sets.test_id = per_test.test_id
)
SELECT
  * EXCEPT (request_server, request_accelerator),
  GREATEST(TIMESTAMP_DIFF(ended, started, MILLISECOND) / 1000.0, 1.0) AS duration_s,
  SAFE_DIVIDE(errors, requests) AS error_rate,
  requests / GREATEST(TIMESTAMP_DIFF(ended, started, MILLISECOND) / 1000.0, 1.0) AS qps,
  (requests - errors) / GREATEST(TIMESTAMP_DIFF(ended, started, MILLISECOND) / 1000.0, 1.0)
    AS success_qps,
  output_tokens / GREATEST(TIMESTAMP_DIFF(ended, started, MILLISECOND) / 1000.0, 1.0)
    AS tokens_per_s
FROM timed"""


def _series(unit: str, seconds: float) -> Callable[[Names], str]:
    # The first and last buckets are partial: the test started or stopped inside
    # them, so their counts are not per-{unit} rates. They are kept and marked
    # (``partial``); charts leave them out.
    def sql(n: Names) -> str:
        return f"""WITH measured AS (
  {_measured(n)}
), bucketed AS (
  SELECT
    *,
    TIMESTAMP_TRUNC(start_time, {unit}) AS bucket,
    TIMESTAMP_TRUNC(MIN(start_time) OVER (PARTITION BY test_id), {unit}) AS first_bucket,
    TIMESTAMP_TRUNC(MAX(start_time) OVER (PARTITION BY test_id), {unit}) AS last_bucket
  FROM measured
), with_percentiles AS (
  SELECT *, {_percentiles("PARTITION BY test_id, bucket", _LATENCY + _TTFT)}
  FROM bucketed
)
SELECT
  test_id,
  bucket,
  TIMESTAMP_DIFF(bucket, ANY_VALUE(first_bucket), SECOND) AS offset_s,
  bucket = ANY_VALUE(first_bucket) OR bucket = ANY_VALUE(last_bucket) AS partial,
  COUNT(*) AS requests,
  COUNTIF(exception IS NOT NULL) AS errors,
  COUNT(*) / {seconds} AS qps,
  COUNTIF(exception IS NULL) / {seconds} AS success_qps,
    {_picked(_LATENCY + _TTFT)},
  MAX(ok_ms) AS max_ms,
  MAX(users) AS users,
  IFNULL(SUM(num_output_tokens), 0) / {seconds} AS tokens_per_s
FROM with_percentiles
GROUP BY test_id, bucket"""
    return sql


def _by_name(n: Names) -> str:
    # Locust's statistics table: one row per request type and name.
    return f"""WITH with_percentiles AS (
  SELECT *, {_percentiles("PARTITION BY test_id, request_type, request_name",
                          _LATENCY)}
  FROM ({_measured(n)})
)
SELECT
  test_id,
  request_type,
  request_name,
  COUNT(*) AS requests,
  COUNTIF(exception IS NOT NULL) AS failures,
    {_picked(_LATENCY)},
  MAX(ok_ms) AS max_ms,
  AVG(ok_ms) AS mean_ms,
  AVG(response_length) AS mean_bytes,
  IFNULL(SUM(num_output_tokens), 0) AS output_tokens
FROM with_percentiles
GROUP BY test_id, request_type, request_name"""


def _failures(n: Names) -> str:
    return f"""SELECT
  test_id,
  request_type,
  request_name,
  exception AS message,
  COUNT(*) AS occurrences,
  MIN(start_time) AS first_seen,
  MAX(start_time) AS last_seen
FROM {n.sql("requests_unique")}
WHERE exception IS NOT NULL
GROUP BY test_id, request_type, request_name, exception"""


_BASELINE = "PARTITION BY model_name, server ORDER BY started"


def _change(field: str) -> str:
    previous = f"LAG({field}) OVER ({_BASELINE})"
    return f"SAFE_DIVIDE({field} - {previous}, {previous}) AS {field}_change"


def _comparison(n: Names) -> str:
    # A test that mixed models is no one's baseline and has none.
    return f"""SELECT
  test_id, model_name, server, accelerator, users, started, requests, qps, success_qps,
  error_rate, p50_ms, p90_ms, p99_ms, tokens_per_s,
  LAG(test_id) OVER ({_BASELINE}) AS previous_test_id,
  {_change("qps")},
  {_change("success_qps")},
  {_change("p50_ms")},
  {_change("p99_ms")},
  {_change("tokens_per_s")},
  (error_rate - LAG(error_rate) OVER ({_BASELINE})) * 100 AS error_rate_change_pp
FROM {n.sql("test_summary")}
WHERE model_count <= 1"""


# In dependency order: each view reads only the tables or views before it.
VIEWS: tuple[View, ...] = (
    View("requests_unique", "requests, one row per row key (redeliveries removed)", _unique),
    View("test_runs_unique", "per test: what the load generator was asked to do, and when "
         "it started and stopped", _runs),
    View("test_summary", "per test: run metadata, requests, QPS, success QPS, error rate, "
         "exact latency percentiles over successful requests, tokens/s", _summary),
    View("test_timeseries", "per test and minute (partial first and last minutes marked)",
         _series("MINUTE", 60.0)),
    View("test_timeseries_seconds", "per test and second (partial first and last seconds "
         "marked)", _series("SECOND", 1.0)),
    View("test_requests_by_name", "per test, request type and name: Locust's statistics "
         "table", _by_name),
    View("test_failures", "per test: each distinct failure message and how often",
         _failures),
    View("test_comparison", "each single-model test next to the previous one of the same "
         "model and server", _comparison),
    View(POOL_ACTIONS_UNIQUE, "node-pool actions, one row per action id (redeliveries "
         "removed)", lambda n: _first_copy(n.sql(n.pool_actions_table))),
    View(POOL_SAVINGS_DAILY, "per UTC day, team and node pool: hours removed off-hours and "
         "the accelerator-hours that saved", pool_savings_daily),
    View(JOB_EVENTS_UNIQUE, "job lifecycle events, one row per event id (redeliveries "
         "removed)", lambda n: _first_copy(n.sql(n.job_events_table))),
    View(JOB_LIFECYCLE, "per job request: its transitions, queue wait, provisioning and run "
         "time, chip-hours used and idle slice chip-hours", job_lifecycle),
    View(JOB_USAGE_DAILY, "per UTC day, team and TPU type: jobs submitted, rejected, started, "
         "finished and failed, average durations, chip-hours used and idle", job_usage_daily),
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
