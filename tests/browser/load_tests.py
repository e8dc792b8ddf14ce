"""The load tests the browser suite shows, sent through the real ingest path.

Five tests: two of the same model a day apart (so a comparison has a baseline), one
where a third of the requests fail, one whose id is as long as an id may be and
whose model, server, accelerator and exception text are markup, and one streamed with
SLOs (time to first token, time per output token, inter-token gaps and goodput). Ids must pass the
test-id rule (the ingest path refuses anything else), so the hostile text goes in the
free-text fields.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, time, timedelta
from typing import Any

from shared.metrics.job_event import JOB_EVENT_KIND, job_event_id
from shared.metrics.pool_action import POOL_ACTION_KIND, pool_action_id
from shared.metrics.run import KIND_ATTRIBUTE, RUN_KIND
from tests.functional.test_ingest_metrics import envelope, stored_records

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
# 128 characters, the longest id allowed, with no place a browser may break the line.
LONG_ID = ("lt:20261121.100000_" + "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
           * 3)[:128]

BASELINE = "bench-a"
CANDIDATE = "bench-b"
FAILING = "run-failing"
HOSTILE = LONG_ID
STREAMED = "llm-streamed"
#: The streamed test's SLOs as its run record gives them, and as its page shows them.
STREAMED_SLOS = {"slo_ttft_ms": 40.0, "slo_tpot_ms": 4.0}
STREAMED_SLO_TEXT = "TTFT ≤ 40 ms, TPOT ≤ 4 ms"

HOSTILE_FIELDS = {"model_name": SCRIPT, "server": IMG, "accelerator": SCRIPT + IMG}
HOSTILE_EXCEPTION = f"HTTPError('503 {SCRIPT}') {IMG} " + "E" * 300
#: Text from data that must appear on a page of the hostile test, exactly as written.
HOSTILE_TEXTS = (SCRIPT, IMG, LONG_ID)


def _records(test_id: str, n: int, *, hour: int, latency_ms: float, fail_every: int = 0,
             exception: str = "HTTPError('503 Server Error: Service Unavailable')",
             **fields: Any) -> list[dict[str, Any]]:
    template = stored_records()[0]
    start = datetime(2026, 11, 21, hour, 0, tzinfo=UTC).timestamp()
    return [dict(template, test_id=test_id, response_time=latency_ms + i % 10,
                 start_time=start + i * 0.1,
                 exception=exception if fail_every and i % fail_every == 0 else None,
                 **fields)
            for i in range(n)]


def ingest_load_tests(client: Any) -> None:
    """Send every test's records to ``ingest_metrics`` (a functions-framework test client).

    Raises AssertionError when the function does not acknowledge a message.
    """
    batches = {
        BASELINE: _records(BASELINE, 200, hour=8, latency_ms=20.0, fail_every=50),
        CANDIDATE: _records(CANDIDATE, 250, hour=9, latency_ms=30.0, fail_every=25),
        FAILING: _records(FAILING, 150, hour=10, latency_ms=15.0, fail_every=3),
        HOSTILE: _records(HOSTILE, 120, hour=11, latency_ms=25.0, fail_every=4,
                          exception=HOSTILE_EXCEPTION, **HOSTILE_FIELDS),
    }
    batches[STREAMED] = _streamed_records(STREAMED, 300, hour=12)
    for number, records in enumerate(batches.values()):
        response = client.post("/", json=envelope(records, message_id=f"browser-{number}"))
        assert response.status_code == 200, response.get_data(as_text=True)
    start = datetime(2026, 11, 21, 12, 0, tzinfo=UTC).timestamp()
    for phase, at in (("start", start - 0.5), ("stop", start + 31.0)):
        run = {"test_id": STREAMED, "phase": phase, "at": at, "model_name": "toy-lm-stream",
               "server": "triton", "accelerator": "cpu", "users": 4, **STREAMED_SLOS}
        event = envelope(message_id=f"browser-run-{phase}")
        event["message"]["data"] = base64.b64encode(json.dumps(run).encode()).decode()
        event["message"]["attributes"] = {KIND_ATTRIBUTE: RUN_KIND, "test_id": STREAMED}
        response = client.post("/", json=event)
        assert response.status_code == 200, response.get_data(as_text=True)


def _streamed_records(test_id: str, n: int, *, hour: int) -> list[dict[str, Any]]:
    """Streamed requests ten a second: 2-17 tokens 3-5 ms apart after a first token at
    20-60 ms, so some requests miss :data:`STREAMED_SLOS` and some meet them."""
    records = []
    for i, record in enumerate(_records(test_id, n, hour=hour, latency_ms=0.0,
                                        fail_every=20)):
        tokens = 2 + i % 16
        gaps = [3.0 + (i + k) % 3 for k in range(tokens - 1)]
        ttft = 20.0 + i % 41
        record.update(model_name="toy-lm-stream", model_method="generate_stream",
                      num_output_tokens=tokens, response_time=ttft + sum(gaps))
        if record["exception"] is None:
            record.update(time_to_first_token=ttft, inter_token_latencies=gaps,
                          time_per_output_token=sum(gaps) / (tokens - 1))
        records.append(record)
    return records


#: A node pool whose team, name and accelerator are markup, removed off-hours yesterday
#: and still removed, so the savings page has rows, totals and a chart to show.
HOSTILE_POOL = {"team": SCRIPT, "pool": IMG, "accelerator_type": SCRIPT + IMG}


def ingest_pool_actions(client: Any) -> None:
    """Send two removals and a restore of :data:`HOSTILE_POOL` to ``ingest_metrics``."""
    midnight = datetime.combine(datetime.now(UTC).date(), time(), UTC)

    def action(name: str, at: datetime) -> dict[str, Any]:
        return {"action_id": pool_action_id("acme-ml", "us-central2-b", "train", "pool",
                                            name, at),
                "at": at.isoformat(), "project": "acme-ml", "location": "us-central2-b",
                "cluster": "train", "action": name, "method": "resize", "reason": SCRIPT,
                "accelerator_count": 16, **HOSTILE_POOL}

    actions = [action("remove", midnight - timedelta(days=2, hours=6)),
               action("restore", midnight - timedelta(days=1, hours=18)),
               action("remove", midnight - timedelta(hours=6))]
    event = envelope(message_id="browser-pools")
    event["message"]["data"] = base64.b64encode(json.dumps(actions).encode()).decode()
    event["message"]["attributes"] = {KIND_ATTRIBUTE: POOL_ACTION_KIND}
    response = client.post("/", json=event)
    assert response.status_code == 200, response.get_data(as_text=True)


#: Jobs of a team whose name, TPU type and JobSet are markup: one that failed yesterday
#: after its slice idled around the run, one queued since midnight with the longest
#: request id allowed, so the jobs page has every table, a chart and a mark to show.
HOSTILE_JOB = {"team": SCRIPT, "tpu_type": SCRIPT + IMG, "jobset": IMG}
HOSTILE_REQUEST = LONG_ID


def ingest_job_events(client: Any) -> None:
    """Send the lifecycle of the :data:`HOSTILE_JOB` jobs to ``ingest_metrics``."""
    midnight = datetime.combine(datetime.now(UTC).date(), time(), UTC)

    def event(request_id: str, name: str, hours: float, slice_index: int | None = None,
              **extra: Any) -> dict[str, Any]:
        return {"event_id": job_event_id(request_id, name, slice_index), "event": name,
                "at": (midnight + timedelta(hours=hours)).isoformat(),
                "request_id": request_id, "slices": 1, "chips_per_slice": 16,
                "slice_index": slice_index, **HOSTILE_JOB, **extra}

    events = [event("failed-job", "submitted", -14), event("failed-job", "admitted", -13.5),
              event("failed-job", "slice_ready", -13.2, 0), event("failed-job", "running", -13),
              event("failed-job", "finished", -12, outcome="failed", reason=SCRIPT),
              event("failed-job", "slice_deleted", -11.5, 0),
              event(HOSTILE_REQUEST, "submitted", 0)]
    message = envelope(message_id="browser-jobs")
    message["message"]["data"] = base64.b64encode(json.dumps(events).encode()).decode()
    message["message"]["attributes"] = {KIND_ATTRIBUTE: JOB_EVENT_KIND}
    response = client.post("/", json=message)
    assert response.status_code == 200, response.get_data(as_text=True)
