"""The BigQuery schema of the metrics dataset, as code: its tables and the views over them.

Five tables: requests (one row per load-test request, DAY-partitioned on
``start_time``, clustered by test and model), rejected records, test runs (what the
load generator was asked to do, once per test and phase: :mod:`shared.metrics.run`),
pool actions (what ``pool_schedule`` did to a node pool:
:mod:`shared.metrics.pool_action`) and job events (one transition in a job's life:
:mod:`shared.metrics.job_event`). Views, which everything downstream reads (their SQL
lives with each product: :mod:`shared.metrics.loadtest.sql`,
:mod:`shared.metrics.usage.sql`, :mod:`shared.metrics.savings.sql`):

* ``requests_unique`` and ``test_runs_unique`` — one row per row key (and one run per
  test). Pub/Sub delivers at least once and a redelivered message is inserted again
  with the same keys; insertIds make BigQuery drop most copies, the views the rest;
* ``test_summary`` — per test: run metadata, requests, QPS and success QPS, error rate,
  exact p50/p90/p99 of latency, time to first token, time per output token and
  inter-token latency, goodput (share and rate of requests meeting the run's SLOs),
  tokens/s;
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

from collections.abc import Callable
from dataclasses import dataclass

from shared import bigquery as bq
from shared.bigquery import Field
from shared.config import MetricsConfig
from shared.metrics.dedupe import first_copy
from shared.metrics.loadtest.sql import (
    requests_unique,
    test_comparison,
    test_failures,
    test_requests_by_name,
    test_runs_unique,
    test_summary,
    test_timeseries,
)
from shared.metrics.names import Names
from shared.metrics.savings.sql import POOL_ACTIONS_UNIQUE, POOL_SAVINGS_DAILY, pool_savings_daily
from shared.metrics.usage.sql import (
    JOB_EVENTS_UNIQUE,
    JOB_LIFECYCLE,
    JOB_USAGE_DAILY,
    job_lifecycle,
    job_usage_daily,
)

__all__ = ["JOB_EVENT_FIELDS", "POOL_ACTION_FIELDS", "REJECTION_FIELDS", "REQUEST_FIELDS",
           "RUN_FIELDS", "TABLES", "VIEWS", "TableSpec", "View", "apply_schema"]

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
    Field("users", "INT64", "NULLABLE", "concurrent users of the Locust process that sent it"),
    # Added later: columns are only ever appended (bigquery.ensure_table), and rows of
    # older load generators read as null / no gaps.
    Field("time_per_output_token", "FLOAT64", "NULLABLE",
          "milliseconds: (end of stream - time to first token) / (output tokens - 1); "
          "streamed requests with two tokens or more"),
    Field("inter_token_latencies", "FLOAT64", "REPEATED",
          "milliseconds between successive token events of a streamed request, the "
          "first 2,048"),
    Field("worker", "STRING", "NULLABLE",
          "the Locust worker that sent it (client id); null from a single process"),
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
    Field("slo_ttft_ms", "FLOAT64", "NULLABLE",
          "SLO on time to first token (--slo-ttft-ms); null: none"),
    Field("slo_tpot_ms", "FLOAT64", "NULLABLE",
          "SLO on time per output token (--slo-tpot-ms); null: none"),
    Field("slo_latency_ms", "FLOAT64", "NULLABLE",
          "SLO on the whole request's latency (--slo-latency-ms); null: none"),
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


VIEWS: tuple[View, ...] = (
    View("requests_unique", "requests, one row per row key (redeliveries removed)",
         requests_unique),
    View("test_runs_unique", "per test: what the load generator was asked to do, and when "
         "it started and stopped", test_runs_unique),
    View("test_summary", "per test: run metadata, requests, QPS, success QPS, error rate, "
         "exact latency, TTFT, TPOT and inter-token latency percentiles over successful "
         "requests, goodput against the run's SLOs, tokens/s", test_summary),
    View("test_timeseries", "per test and minute (partial first and last minutes marked)",
         test_timeseries("MINUTE", 60.0)),
    View("test_timeseries_seconds", "per test and second (partial first and last seconds "
         "marked)", test_timeseries("SECOND", 1.0)),
    View("test_requests_by_name", "per test, request type and name: Locust's statistics "
         "table", test_requests_by_name),
    View("test_failures", "per test: each distinct failure message and how often",
         test_failures),
    View("test_comparison", "each single-model test next to the previous one of the same "
         "model and server", test_comparison),
    View(POOL_ACTIONS_UNIQUE, "node-pool actions, one row per action id (redeliveries "
         "removed)", lambda n: first_copy(n.sql(n.pool_actions_table))),
    View(POOL_SAVINGS_DAILY, "per UTC day, team and node pool: hours removed off-hours and "
         "the accelerator-hours that saved", pool_savings_daily),
    View(JOB_EVENTS_UNIQUE, "job lifecycle events, one row per event id (redeliveries "
         "removed)", lambda n: first_copy(n.sql(n.job_events_table))),
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
