"""``make bench`` (metrics part): ingest_metrics throughput and BigQuery requests.

Both handlers run in this process through functions-framework (push envelopes in,
base64 and all), writing to a bqemulator process over a socket, so this process's
CPU time is the handler's (decode, validate, encode, HTTP client) and not the
database's. Figures:

* rows/s per core = rows / CPU seconds of this process, and rows/s wall;
* BigQuery insert requests per 10,000 rows, counted at the client.

Baseline in the same run: the naive shape — one record per message, one insert per
message. Goals: ≥ 20,000 rows/s per core through the handler; ≤ 20 insert requests
per 10,000 rows.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import functions_framework

from tests.bench.results import REPO, write_results

ROWS = int(os.environ.get("BENCH_METRICS_ROWS", "10000"))
NAIVE_ROWS = int(os.environ.get("BENCH_METRICS_NAIVE_ROWS", "2000"))
PER_MESSAGE = 500  # the load generator's default batch


def records(n: int, test_id: str) -> list[dict[str, Any]]:
    start = time.time()
    return [{
        "test_id": test_id, "request_type": "POST", "request_name": "/v2/models/toy-lm/infer",
        "response_length": 380 + i % 50, "response_time": 20.0 + (i % 97) / 7,
        "start_time": start + i / 1000, "exception": None if i % 50 else "HTTPError 503",
        "model_name": "toy-lm", "model_method": "infer", "tokenizer": "whitespace",
        "num_input_tokens": 6 + i % 5, "num_output_tokens": 16, "model_response_time": None,
        "server": "triton", "accelerator": "cpu", "users": 8,
    } for i in range(n)]


def envelope(message_id: str, payload: Any) -> dict[str, Any]:
    return {"message": {"data": base64.b64encode(json.dumps(payload).encode()).decode(),
                        "messageId": message_id, "message_id": message_id,
                        "publishTime": "2026-11-21T10:00:00Z"},
            "subscription": "projects/bench/subscriptions/loadtest-metrics-ingest-metrics"}


class InsertCounter:
    """Counts insertAll requests made by the google-cloud-bigquery client."""

    def __init__(self) -> None:
        from google.cloud import bigquery

        self.count = 0
        original = bigquery.Client.insert_rows_json

        def counted(client: Any, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return original(client, *args, **kwargs)

        bigquery.Client.insert_rows_json = counted  # type: ignore[method-assign]


def naive_source() -> str:
    """A handler as often first written: validate the message's one record, insert it."""
    return '''
import base64, json
import functions_framework
from google.cloud import bigquery
from shared.bigquery import client
from shared.metrics.record import MetricRecord

@functions_framework.cloud_event
def naive(cloud_event):
    message = cloud_event.data["message"]
    record = MetricRecord.model_validate(json.loads(base64.b64decode(message["data"])))
    row = record.model_dump(mode="json")
    row["row_key"] = message["messageId"]
    row["message_id"] = message["messageId"]
    row["ingested_at"] = row["start_time"]
    errors = client("accelops-test").insert_rows_json(
        "accelops-test.bench.requests", [row], row_ids=[row["row_key"]])
    if errors:
        raise RuntimeError(errors)
'''


def run(app: Any, bodies: list[dict[str, Any]], counter: InsertCounter,
        rows: int) -> dict[str, float]:
    before = counter.count
    cpu, wall = time.process_time(), time.perf_counter()
    for body in bodies:
        response = app.post("/", json=body)
        if response.status_code != 200:
            raise SystemExit(f"handler answered {response.status_code}")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    requests = counter.count - before
    return {"rows": rows, "messages": len(bodies), "insert_requests": requests,
            "inserts_per_10k_rows": round(requests * 10_000 / rows, 1),
            "cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
            "rows_per_s_per_core": round(rows / cpu), "rows_per_s_wall": round(rows / wall)}


def main() -> int:
    from shared.config import MetricsConfig
    from tests.bigquery_fixtures import count, metrics_dataset

    config = MetricsConfig(dataset="bench")
    with tempfile.TemporaryDirectory() as tmp, metrics_dataset(Path(tmp), config) as dataset:
        counter = InsertCounter()

        batched_app = dataset.ingest
        data = records(ROWS, "bench-batched")
        bodies = [envelope(f"b{i}", data[i:i + PER_MESSAGE])
                  for i in range(0, ROWS, PER_MESSAGE)]
        # Warm-up: imports and the connection, under another test id.
        batched_app.post("/", json=envelope("warm-up", records(10, "bench-warm-up")))
        # One INFO line per message is production's choice; here it would drown the figures.
        logging.getLogger("accelops.metrics").setLevel(logging.WARNING)
        batched = run(batched_app, bodies, counter, ROWS)

        naive_file = Path(tmp) / "naive.py"
        naive_file.write_text(naive_source())
        sys.path.insert(0, str(REPO))
        naive_app = functions_framework.create_app(
            "naive", str(naive_file), "cloudevent").test_client()
        naive_data = records(NAIVE_ROWS, "bench-naive")
        naive_app.post("/", json=envelope("warm-up-naive", records(1, "bench-warm-up")[0]))
        naive = run(naive_app, [envelope(f"n{i}", r) for i, r in enumerate(naive_data)],
                    counter, NAIVE_ROWS)

        stored = count(config, "requests_unique", "test_id = 'bench-batched'")
        if stored != ROWS:
            raise SystemExit(f"only {stored} of {ROWS} rows stored")

    results = {
        "batched": batched, "naive_per_message": naive,
        "speedup_per_core": round(batched["rows_per_s_per_core"]
                                  / naive["rows_per_s_per_core"], 1),
        "goals": {"rows_per_s_per_core": 20_000, "inserts_per_10k_rows": 20},
        "met": {"rows_per_s_per_core": batched["rows_per_s_per_core"] >= 20_000,
                "inserts_per_10k_rows": batched["inserts_per_10k_rows"] <= 20},
    }
    print(f"ingest_metrics, {ROWS} rows in messages of {PER_MESSAGE} "
          f"(baseline: {NAIVE_ROWS} rows, one per message, one insert each)")
    for name, r in (("batched", batched), ("naive", naive)):
        print(f"  {name:<8} {r['rows_per_s_per_core']:>8} rows/s per core  "
              f"{r['rows_per_s_wall']:>8} rows/s wall  "
              f"{r['inserts_per_10k_rows']:>8} inserts per 10k rows")
    print(f"  goals: >= 20000 rows/s per core -> {results['met']['rows_per_s_per_core']}; "
          f"<= 20 inserts per 10k rows -> {results['met']['inserts_per_10k_rows']}")
    write_results("metrics", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
