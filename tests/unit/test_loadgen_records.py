"""Records built from Locust request events, as the metrics pipeline will read them."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from services.loadgen.protocols import Completion
from services.loadgen.records import (
    MESSAGE_DATA_LIMIT,
    RunInfo,
    build_record,
    encode_record,
    message_attributes,
    message_data,
    record_size,
)
from shared.metrics.record import MAX_EXCEPTION_CHARS, MetricRecord

RUN = RunInfo(test_id="20250314-093000-5f2a9c", server="triton", model="toy-lm",
              accelerator="v5litepod-8")
START = 1_741_944_600.25  # 2025-03-14 09:30:00.25 UTC


class CatchResponseError(Exception):
    """Stands in for locust.exception.CatchResponseError (importing locust patches gevent)."""


def event(**changes: Any) -> dict[str, Any]:
    """The keyword arguments Locust passes to ``events.request`` for one POST."""
    base: dict[str, Any] = {
        "request_type": "POST",
        "name": "/v2/models/toy-lm/infer",
        "response_time": 41.5,
        "response_length": 131,
        "response": object(),
        "context": {"model_name": "toy-lm", "model_method": "infer", "tokenizer": "whitespace",
                    "num_input_tokens": 9},
        "exception": None,
        "start_time": START,
        "url": "http://127.0.0.1:8000/v2/models/toy-lm/infer",
    }
    base.update(changes)
    return base


def test_a_successful_request_becomes_a_record_with_exactly_the_metric_fields() -> None:
    record = build_record(event(), RUN, users=4)

    assert set(record) == set(MetricRecord.model_fields)
    parsed = MetricRecord.model_validate(record)
    assert not parsed.failed
    assert (parsed.test_id, parsed.request_type, parsed.request_name) == (
        RUN.test_id, "POST", "/v2/models/toy-lm/infer")
    assert (parsed.response_time, parsed.response_length) == (41.5, 131)
    assert (parsed.server, parsed.accelerator, parsed.users) == ("triton", "v5litepod-8", 4)


def test_a_failed_request_records_its_exception_type_and_message() -> None:
    record = build_record(event(exception=CatchResponseError("HTTP 404: unknown model")),
                          RUN, users=2)

    parsed = MetricRecord.model_validate(record)
    assert parsed.failed
    assert parsed.exception == "CatchResponseError: HTTP 404: unknown model"


def test_an_exception_without_a_message_is_recorded_by_its_type() -> None:
    record = build_record(event(exception=ConnectionResetError()), RUN, users=1)

    assert record["exception"] == "ConnectionResetError"


def test_a_long_exception_is_clipped_rather_than_losing_the_record() -> None:
    record = build_record(event(exception=RuntimeError("x" * 10_000)), RUN, users=1)

    assert len(record["exception"]) == MAX_EXCEPTION_CHARS
    MetricRecord.model_validate(record)


def test_token_counts_and_server_time_come_from_the_request_context() -> None:
    context = {"model_name": "toy-lm", "model_method": "infer",
               **Completion(text="one two three", num_input_tokens=None, num_output_tokens=None,
                            model_response_time=12.5).context("a b c d")}
    parsed = MetricRecord.model_validate(build_record(event(context=context), RUN, users=1))

    assert (parsed.num_input_tokens, parsed.num_output_tokens) == (4, 3)
    assert (parsed.tokenizer, parsed.model_method) == ("whitespace", "infer")
    assert parsed.model_response_time == 12.5


def test_counts_the_server_reports_are_recorded_as_the_servers_tokenizer() -> None:
    context = Completion(text="hi", num_input_tokens=17, num_output_tokens=64,
                         model_response_time=None).context("ignored prompt")
    parsed = MetricRecord.model_validate(build_record(event(context=context), RUN, users=1))

    assert (parsed.num_input_tokens, parsed.num_output_tokens, parsed.tokenizer) == (
        17, 64, "server")
    assert parsed.model_response_time is None


def test_a_request_without_context_falls_back_to_the_runs_model() -> None:
    parsed = MetricRecord.model_validate(build_record(event(context={}), RUN, users=None))

    assert parsed.model_name == "toy-lm"
    assert (parsed.num_input_tokens, parsed.num_output_tokens, parsed.users) == (None, None, None)


def test_a_streamed_request_records_its_time_to_first_token() -> None:
    context = {"model_name": "toy-lm-stream", "model_method": "generate_stream",
               **Completion(text="one two", num_input_tokens=None, num_output_tokens=None,
                            model_response_time=None, time_to_first_token=6.25).context("a b")}
    parsed = MetricRecord.model_validate(build_record(event(context=context), RUN, users=1))

    assert parsed.time_to_first_token == 6.25
    assert parsed.response_time == 41.5


def test_a_request_that_was_not_streamed_leaves_time_to_first_token_null() -> None:
    record = build_record(event(), RUN, users=1)

    assert record["time_to_first_token"] is None
    assert MetricRecord.model_validate(record).time_to_first_token is None


def test_start_time_is_kept_as_the_epoch_seconds_locust_reports() -> None:
    record = build_record(event(), RUN, users=1)

    assert record["start_time"] == START
    assert MetricRecord.model_validate(record).start_time == datetime(
        2025, 3, 14, 9, 30, 0, 250_000, tzinfo=UTC)


def test_a_missing_start_time_is_the_clock_minus_the_response_time() -> None:
    record = build_record(event(start_time=None, response_time=500.0), RUN, users=1,
                          clock=lambda: START)

    assert record["start_time"] == START - 0.5


def test_impossible_values_are_clamped_so_the_record_still_validates() -> None:
    record = build_record(
        event(response_time=-3.0, response_length=None, name="/x" * 2000,
              context={"num_input_tokens": -5, "num_output_tokens": True,
                       "model_response_time": math.nan}),
        RUN, users=3)

    parsed = MetricRecord.model_validate(record)
    assert (parsed.response_time, parsed.response_length) == (0.0, 0)
    assert len(parsed.request_name) == 1024
    assert (parsed.num_input_tokens, parsed.num_output_tokens) == (0, None)
    assert parsed.model_response_time is None


@given(
    response_time=st.one_of(st.none(), st.floats(allow_nan=True), st.integers(), st.text()),
    length=st.one_of(st.none(), st.integers(-10, 10**12), st.text()),
    start=st.one_of(st.none(), st.floats(1e9, 4e9), st.booleans(), st.text()),
    name=st.text(max_size=2000),
    context=st.dictionaries(
        st.sampled_from(["model_name", "model_method", "tokenizer", "num_input_tokens",
                         "num_output_tokens", "model_response_time", "time_to_first_token"]),
        st.one_of(st.none(), st.integers(-10**12, 10**12), st.floats(), st.text(max_size=400),
                  st.booleans())),
    exception=st.one_of(st.none(), st.text(max_size=3000).map(ValueError)),
)
def test_any_request_event_becomes_a_valid_record(response_time: Any, length: Any, start: Any,
                                                  name: str, context: dict[str, Any],
                                                  exception: Exception | None) -> None:
    record = build_record(
        event(response_time=response_time, response_length=length, start_time=start, name=name,
              context=context, exception=exception),
        RUN, users=7, clock=lambda: START)

    parsed = MetricRecord.model_validate(record)
    assert parsed.failed is (exception is not None)
    assert json.loads(encode_record(record)) == record


def test_a_message_is_a_json_array_no_longer_than_the_batcher_counted() -> None:
    records = [build_record(event(name=f"/r/{i}"), RUN, users=1) for i in range(3)]
    encoded = [encode_record(r) for r in records]

    data = message_data(encoded)

    assert json.loads(data) == records
    assert len(data) == sum(record_size(e) for e in encoded) + 1
    assert len(message_data([])) == 2 <= MESSAGE_DATA_LIMIT


def test_message_attributes_name_the_test_and_count_the_records() -> None:
    assert message_attributes(RUN.test_id, 500) == {"test_id": RUN.test_id, "records": "500"}
