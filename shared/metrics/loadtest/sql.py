"""The load-test views' SQL: requests and runs once per key, each test's summary
(QPS, error rate, exact latency percentiles over successful requests, time to first
token, time per output token, inter-token latency, goodput, tokens/s), its time series
per minute and per second, Locust's statistics and failures tables, and each test
beside the previous one of the same model and server.
:mod:`shared.metrics.schema` names them as views.

Goodput follows vLLM's serving benchmark and inference-perf: a request is *good* when
it succeeded and meets every SLO the test's run record gives (each ``<=``, inclusive):
its latency (``response_time``) within ``slo_latency_ms``; a measured time to first
token within ``slo_ttft_ms``; a time per output token within ``slo_tpot_ms`` (a streamed
request of fewer than two tokens has none and meets it, as vLLM counts its TPOT as 0).
A request lacking a measure an SLO needs (not streamed, for TTFT) does not meet it, and
a failed request is never good. ``goodput`` is the share of all requests that are good
(failures in the denominator: inference-perf divides by successful requests only),
``goodput_qps`` good requests per second of the test, vLLM's "request goodput". Both are
NULL for a test without SLOs (or without a run record)."""

from __future__ import annotations

from collections.abc import Callable

from shared.metrics.dedupe import first_copy
from shared.metrics.names import Names

__all__ = ["requests_unique", "test_comparison", "test_failures", "test_requests_by_name",
           "test_runs_unique", "test_summary", "test_timeseries"]


def requests_unique(n: Names) -> str:
    return first_copy(n.sql(n.table))


def test_runs_unique(n: Names) -> str:
    # A test's start record says what was asked for; its stop record when it ended.
    # Either may be missing (a crashed load generator, a lost message): the other
    # still describes the run.
    return f"""WITH unique_runs AS (
{first_copy(n.sql(n.runs_table))}
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
                    "locust_version", "loadgen_revision", "host", "slo_ttft_ms", "slo_tpot_ms",
                    "slo_latency_ms")


def _coalesced(first: str, second: str, fields: tuple[str, ...]) -> str:
    return ",\n".join(f"  COALESCE({first}.{f}, {second}.{f}) AS {f}" for f in fields)


# Exact percentiles: PERCENTILE_CONT (linear interpolation between the closest ranks,
# what numpy and statistics.quantiles(method="inclusive") compute). BigQuery has it
# only as an analytic function, so it is computed per row over the window and picked
# up with ANY_VALUE when grouping. Latency is over successful requests only (a fast
# 404 would make a failing run look quick); NULLs, i.e. failures, are ignored.
# (column, measured value, fraction): latency of successful requests, time to first
# token and time per output token of streamed ones, and the gaps between their tokens.
_Percentile = tuple[str, str, float]


def _p50_p90_p99(prefix: str, value: str) -> tuple[_Percentile, ...]:
    return tuple((f"{prefix}p{round(q * 100)}_ms", value, q) for q in (0.5, 0.9, 0.99))


_LATENCY = _p50_p90_p99("", "ok_ms")
_TTFT = _p50_p90_p99("ttft_", "ttft_ms")
_TPOT = _p50_p90_p99("tpot_", "tpot_ms")
_ITL = _p50_p90_p99("itl_", "gap")


def _percentiles(window: str, columns: tuple[_Percentile, ...]) -> str:
    """The window percentiles named in ``columns``, computed on every row."""
    return ",\n    ".join(f"PERCENTILE_CONT({value}, {q}) OVER ({window}) AS {column}"
                           for column, value, q in columns)


def _picked(columns: tuple[_Percentile, ...]) -> str:
    """The window percentiles of :func:`_percentiles`, one value per group."""
    return ",\n    ".join(f"ANY_VALUE({column}) AS {column}" for column, _, _ in columns)


def _measured(n: Names) -> str:
    """The unique requests, with what every aggregate needs: latency, time to first
    token and time per output token of successful requests (NULL for failures) and when
    each response ended."""
    return f"""SELECT
    *,
    IF(exception IS NULL, response_time, NULL) AS ok_ms,
    IF(exception IS NULL, time_to_first_token, NULL) AS ttft_ms,
    IF(exception IS NULL, time_per_output_token, NULL) AS tpot_ms,
    TIMESTAMP_ADD(start_time, INTERVAL CAST(response_time * 1000 AS INT64) MICROSECOND)
      AS end_time
  FROM {n.sql("requests_unique")}"""


def _judged(n: Names) -> str:
    """The measured requests, each judged against its test's SLOs (module docstring):
    ``slo_given`` (NULL without a run record), and ``good``."""
    return f"""SELECT
    measured.*,
    slos.slo_given,
    slos.slo_given AND measured.exception IS NULL
      AND (slos.slo_latency_ms IS NULL OR measured.response_time <= slos.slo_latency_ms)
      AND (slos.slo_ttft_ms IS NULL
           OR IFNULL(measured.time_to_first_token <= slos.slo_ttft_ms, FALSE))
      AND (slos.slo_tpot_ms IS NULL
           OR (measured.time_to_first_token IS NOT NULL
               AND IFNULL(measured.time_per_output_token <= slos.slo_tpot_ms,
                          IFNULL(measured.num_output_tokens < 2, FALSE))))
      AS good
  FROM ({_measured(n)}) AS measured
  LEFT JOIN (
    SELECT test_id, slo_ttft_ms, slo_tpot_ms, slo_latency_ms,
      slo_ttft_ms IS NOT NULL OR slo_tpot_ms IS NOT NULL OR slo_latency_ms IS NOT NULL
        AS slo_given
    FROM {n.sql("test_runs_unique")}
  ) AS slos ON slos.test_id = measured.test_id"""


# Good requests of a group; NULL when its test gave no SLO.
_GOOD = "IF(LOGICAL_OR(slo_given), COUNTIF(good), NULL)"


def test_summary(n: Names) -> str:
    # The model, server and accelerator come from the run record. Without one (an
    # older load generator) the model is the one most requests named, and the row
    # says so (model_inferred); a test whose requests named several models is
    # flagged either way (model_count > 1), and never paired with a baseline.
    return f"""WITH measured AS (
  {_judged(n)}
), with_percentiles AS (
  SELECT *, {_percentiles("PARTITION BY test_id", _LATENCY + _TTFT + _TPOT)}
  FROM measured
), gaps AS (
  -- Every gap between two tokens of a successful streamed request, as its own row.
  SELECT measured.test_id, gap,
    {_percentiles("PARTITION BY measured.test_id", _ITL)}
  FROM measured, UNNEST(measured.inter_token_latencies) AS gap
  WHERE measured.exception IS NULL
), itl AS (
  SELECT test_id, {_picked(_ITL)}, AVG(gap) AS itl_mean_ms, COUNT(*) AS itl_gaps
  FROM gaps
  GROUP BY test_id
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
    {_GOOD} AS good_requests,
    {_picked(_LATENCY + _TTFT + _TPOT)},
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
    runs.run_stopped IS NOT NULL AS finished,
    itl.* EXCEPT (test_id)
  FROM per_test
  LEFT JOIN {n.sql("test_runs_unique")} AS runs ON runs.test_id = per_test.test_id
  LEFT JOIN itl ON itl.test_id = per_test.test_id
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
  SAFE_DIVIDE(good_requests, requests) AS goodput,
  good_requests / GREATEST(TIMESTAMP_DIFF(ended, started, MILLISECOND) / 1000.0, 1.0)
    AS goodput_qps,
  output_tokens / GREATEST(TIMESTAMP_DIFF(ended, started, MILLISECOND) / 1000.0, 1.0)
    AS tokens_per_s
FROM timed"""


def test_timeseries(unit: str, seconds: float) -> Callable[[Names], str]:
    # The first and last buckets are partial: the test started or stopped inside
    # them, so their counts are not per-{unit} rates. They are kept and marked
    # (``partial``); charts leave them out. Users are the test's: the sum of each
    # worker's peak in the bucket (distributed runs have one count per worker).
    def sql(n: Names) -> str:
        return f"""WITH measured AS (
  {_judged(n)}
), bucketed AS (
  SELECT
    *,
    TIMESTAMP_TRUNC(start_time, {unit}) AS bucket,
    TIMESTAMP_TRUNC(MIN(start_time) OVER (PARTITION BY test_id), {unit}) AS first_bucket,
    TIMESTAMP_TRUNC(MAX(start_time) OVER (PARTITION BY test_id), {unit}) AS last_bucket
  FROM measured
), with_percentiles AS (
  SELECT *, {_percentiles("PARTITION BY test_id, bucket", _LATENCY + _TTFT + _TPOT)}
  FROM bucketed
), users_per_bucket AS (
  -- Each worker's peak in the bucket, added up: a record carries its own
  -- process's user count; NULL workers (one process) make one group.
  SELECT test_id, bucket, SUM(peak) AS users
  FROM (SELECT test_id, bucket, worker, MAX(users) AS peak
        FROM bucketed GROUP BY test_id, bucket, worker)
  GROUP BY test_id, bucket
), per_bucket AS (
SELECT
  test_id,
  bucket,
  TIMESTAMP_DIFF(bucket, ANY_VALUE(first_bucket), SECOND) AS offset_s,
  bucket = ANY_VALUE(first_bucket) OR bucket = ANY_VALUE(last_bucket) AS partial,
  COUNT(*) AS requests,
  COUNTIF(exception IS NOT NULL) AS errors,
  COUNT(*) / {seconds} AS qps,
  COUNTIF(exception IS NULL) / {seconds} AS success_qps,
  {_GOOD} / {seconds} AS goodput_qps,
    {_picked(_LATENCY + _TTFT + _TPOT)},
  MAX(ok_ms) AS max_ms,
  IFNULL(SUM(num_output_tokens), 0) / {seconds} AS tokens_per_s
FROM with_percentiles
GROUP BY test_id, bucket
)
SELECT per_bucket.*, users_per_bucket.users
FROM per_bucket JOIN users_per_bucket USING (test_id, bucket)"""
    return sql


def test_requests_by_name(n: Names) -> str:
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


def test_failures(n: Names) -> str:
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


def test_comparison(n: Names) -> str:
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
