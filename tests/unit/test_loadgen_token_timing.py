"""Time per output token and inter-token latencies from the arrival times of a stream's
events: the definitions of vLLM's serving benchmark and inference-perf, and their edges."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.loadgen.protocols import ResponseError, TritonStream
from services.loadgen.records import RunInfo, build_record
from services.loadgen.token_timing import TokenClock, time_per_output_token
from shared.metrics.record import MAX_INTER_TOKEN_LATENCIES, MetricRecord

RUN = RunInfo(test_id="tt-1", server="triton", model="toy-lm-stream", accelerator="cpu")


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


def tokens(*texts: str, **counts: int) -> bytes:
    return sse(*({"text_output": t, **counts} for t in texts))


def streamed(arrivals: list[tuple[bytes, float]], end_ms: float) -> dict[str, Any]:
    """The record context of a stream whose chunks arrived at the given times."""
    stream = TritonStream()
    for chunk, at in arrivals:
        stream.feed(chunk, at_ms=at)
    return stream.finish(end_ms).context("a prompt")


def test_tpot_is_the_time_after_the_first_token_over_the_tokens_after_it() -> None:
    context = streamed([(tokens("a"), 30.0), (tokens(" b"), 34.0), (tokens(" c"), 41.0),
                        (tokens(" d"), 44.0)], end_ms=45.0)

    assert context["time_to_first_token"] == 30.0
    # (45 - 30) / (4 - 1): from the first token to the end of the stream.
    assert context["time_per_output_token"] == pytest.approx(5.0)
    assert context["inter_token_latencies"] == [4.0, 7.0, 3.0]


def test_the_gaps_are_per_event_and_tpot_per_token_when_an_event_carries_several() -> None:
    # A server that sends two tokens per event: two gaps, five tokens.
    context = streamed([(tokens("a", num_output_tokens=1), 10.0),
                        (tokens(" b c", num_output_tokens=3), 16.0),
                        (tokens(" d e", num_output_tokens=5), 22.0)], end_ms=22.0)

    assert context["num_output_tokens"] == 5
    assert context["inter_token_latencies"] == [6.0, 6.0]
    assert context["time_per_output_token"] == pytest.approx(12.0 / 4)


def test_events_that_arrive_in_one_chunk_have_a_gap_of_zero() -> None:
    context = streamed([(tokens("a", " b"), 10.0), (tokens(" c"), 13.0)], end_ms=13.0)

    assert context["inter_token_latencies"] == [0.0, 3.0]


def test_one_token_has_a_time_to_first_token_but_no_tpot_and_no_gaps() -> None:
    context = streamed([(tokens("only"), 12.0)], end_ms=12.5)

    assert context["time_to_first_token"] == 12.0
    assert context["time_per_output_token"] is None
    assert context["inter_token_latencies"] == []


def test_a_stream_without_tokens_is_a_failure_with_no_timings() -> None:
    stream = TritonStream()
    stream.feed(sse({"text_output": ""}, {"model_name": "m"}), at_ms=5.0)

    with pytest.raises(ResponseError, match="no tokens"):
        stream.finish(6.0)


def test_an_error_event_mid_stream_fails_the_request_and_keeps_none_of_its_timings() -> None:
    stream = TritonStream()
    stream.feed(tokens("a", " b"), at_ms=5.0)
    stream.feed(sse({"error": "out of memory"}), at_ms=9.0)

    with pytest.raises(ResponseError, match="out of memory"):
        stream.finish(9.5)


def test_without_an_end_time_the_stream_ends_at_its_last_token() -> None:
    stream = TritonStream()
    stream.feed(tokens("a"), at_ms=10.0)
    stream.feed(tokens(" b", " c"), at_ms=20.0)

    completion = stream.finish()

    assert completion.stream_end == 20.0
    assert completion.context("p")["time_per_output_token"] == pytest.approx(5.0)


@pytest.mark.parametrize(("ttft", "end", "count", "expected"), [
    (10.0, 30.0, 5, 5.0),
    (10.0, 30.0, 2, 20.0),
    (10.0, 30.0, 1, None),
    (10.0, 30.0, 0, None),
    (None, 30.0, 5, None),
    (10.0, None, 5, None),
    (10.0, 30.0, None, None),
    (30.0, 10.0, 3, 0.0),  # an end before the first token is a clock oddity, not negative
])
def test_time_per_output_token_edges(ttft: float | None, end: float | None, count: int | None,
                                     expected: float | None) -> None:
    assert time_per_output_token(ttft, end, count) == expected


def test_only_the_first_gaps_up_to_the_bound_are_kept_but_every_event_is_counted() -> None:
    clock = TokenClock(limit=3)
    for at in (1.0, 2.0, 4.0, 7.0, 11.0, 16.0):
        clock.token(at)

    assert clock.gaps == [1.0, 2.0, 3.0]
    assert (clock.events, clock.first_ms, clock.last_ms) == (6, 1.0, 16.0)


def test_the_record_keeps_the_gaps_to_the_microsecond_within_the_bound() -> None:
    gaps = [1.23456789] * (MAX_INTER_TOKEN_LATENCIES + 10)
    context = {"time_to_first_token": 9.0, "time_per_output_token": 1.2345678,
               "inter_token_latencies": gaps, "num_output_tokens": len(gaps) + 1}
    event = {"request_type": "POST", "name": "/v2/models/toy-lm-stream/generate_stream",
             "response_time": 40.0, "response_length": 10, "start_time": 1_795_268_540.0,
             "exception": None, "context": context}

    record = build_record(event, RUN, users=1)

    assert record["inter_token_latencies"] == [1.235] * MAX_INTER_TOKEN_LATENCIES
    parsed = MetricRecord.model_validate(record)
    assert parsed.time_per_output_token == pytest.approx(1.2345678)
    assert len(parsed.inter_token_latencies) == MAX_INTER_TOKEN_LATENCIES


def test_a_record_of_a_request_that_was_not_streamed_has_no_tpot_and_no_gaps() -> None:
    event = {"request_type": "POST", "name": "/v2/models/toy-lm/infer", "response_time": 4.0,
             "start_time": 1_795_268_540.0, "context": {"num_output_tokens": 8}}

    record = build_record(event, RUN, users=1)

    assert (record["time_per_output_token"], record["inter_token_latencies"]) == (None, [])


@pytest.mark.parametrize("value", [None, [], [0.5, 1.5]])
def test_ingest_reads_null_or_a_list_of_gaps(value: Any) -> None:
    raw = {"test_id": "t", "request_type": "POST", "request_name": "/x",
           "response_time": 3.0, "start_time": 1_795_268_540.0,
           "inter_token_latencies": value}

    assert MetricRecord.model_validate(raw).inter_token_latencies == (value or [])


@pytest.mark.parametrize("value", [[-1.0], ["1.5"], [True], [1e12], 3.0])
def test_ingest_refuses_gaps_that_are_not_durations(value: Any) -> None:
    raw = {"test_id": "t", "request_type": "POST", "request_name": "/x",
           "response_time": 3.0, "start_time": 1_795_268_540.0,
           "inter_token_latencies": value}

    with pytest.raises(ValueError, match="inter_token_latencies"):
        MetricRecord.model_validate(raw)
