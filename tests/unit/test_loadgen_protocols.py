"""Triton and Saxml request bodies, and what the load generator reads from responses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.loadgen.protocols import (
    BUILTIN_PROMPTS,
    ResponseError,
    TritonStream,
    error_text,
    load_prompts,
    parse_saxml,
    parse_triton,
    saxml_request,
    triton_request,
    triton_stream_request,
)
from services.loadgen.sse import MAX_EVENT_CHARS


def triton_response(**outputs: Any) -> dict[str, Any]:
    return {"model_name": "toy-lm", "outputs": [
        {"name": name, "datatype": "BYTES" if isinstance(v, str) else "INT32", "shape": [1, 1],
         "data": [v]} for name, v in outputs.items()]}


def test_a_triton_request_is_the_v2_json_inference_body() -> None:
    assert triton_request("Hi there", 32) == {"inputs": [
        {"name": "text_input", "shape": [1, 1], "datatype": "BYTES", "data": ["Hi there"]},
        {"name": "max_tokens", "shape": [1, 1], "datatype": "INT32", "data": [32]},
    ]}


def test_triton_token_counts_reported_by_the_model_are_used() -> None:
    completion = parse_triton(triton_response(text_output="a b", num_input_tokens=12,
                                              num_output_tokens=40))

    assert completion.context("p q") == {"num_input_tokens": 12, "num_output_tokens": 40,
                                         "tokenizer": "server", "model_response_time": None,
                                         "time_to_first_token": None,
                                         "time_per_output_token": None,
                                         "inter_token_latencies": []}


def test_triton_text_without_counts_is_counted_by_whitespace() -> None:
    completion = parse_triton(triton_response(text_output="one two  three\nfour"))

    assert completion.context("five six") == {"num_input_tokens": 2, "num_output_tokens": 4,
                                              "tokenizer": "whitespace",
                                              "model_response_time": None,
                                              "time_to_first_token": None,
                                              "time_per_output_token": None,
                                              "inter_token_latencies": []}


def test_a_triton_reported_model_time_comes_from_the_response_parameters() -> None:
    body = {**triton_response(text_output="x"), "parameters": {"model_response_time_ms": 8.5}}

    assert parse_triton(body).model_response_time == 8.5


@pytest.mark.parametrize("body", [{"model_name": "toy-lm"}, {"outputs": []}, ["x"], "x"])
def test_a_triton_response_without_outputs_is_not_a_completion(body: Any) -> None:
    with pytest.raises(ResponseError):
        parse_triton(body)


def test_a_saxml_request_is_the_http_proxy_generate_body() -> None:
    assert saxml_request("/sax/test/lm", "Hi", 16) == {
        "model": "/sax/test/lm", "query": "Hi",
        "extra_inputs": {"max_tokens": 16, "per_example_max_decode_steps": 16}}


@pytest.mark.parametrize("body", [
    [["the generated text", -1.5], ["another sample", -2.0]],
    {"generate_response": [["the generated text", -1.5]]},
    {"response": [["the generated text", -1.5]]},
    {"text": "the generated text"},
    [{"generated_text": "the generated text"}],
    "the generated text",
])
def test_saxml_generated_text_is_found_in_any_common_shape(body: Any) -> None:
    completion = parse_saxml(body)

    assert completion.text == "the generated text"
    assert completion.context("a b c")["num_output_tokens"] == 3


def test_saxml_counts_and_time_in_the_response_object_are_used() -> None:
    completion = parse_saxml({"text": "x", "num_input_tokens": 5, "num_output_tokens": 9,
                              "model_response_time_ms": 20})

    assert (completion.num_input_tokens, completion.num_output_tokens,
            completion.model_response_time) == (5, 9, 20.0)


@pytest.mark.parametrize("body", [{}, [], {"status": "ok"}, [[1.0, 2.0]], None])
def test_a_saxml_response_without_text_is_not_a_completion(body: Any) -> None:
    with pytest.raises(ResponseError):
        parse_saxml(body)


def test_an_error_message_names_the_status_and_the_servers_own_error() -> None:
    assert error_text(400, b'{"error":"Request for unknown model"}') == (
        "HTTP 400: Request for unknown model")
    assert error_text(400, b'{\n    "Error": "model /sax/test/x not found"\n}\n') == (
        "HTTP 400: model /sax/test/x not found")
    assert error_text(500, b'{"detail": "model /sax/test/x not found"}') == (
        "HTTP 500: model /sax/test/x not found")
    assert error_text(503, b"") == "HTTP 503"
    assert error_text(500, b"x" * 1000).startswith("HTTP 500: xxx")
    assert len(error_text(500, b"x" * 1000)) == 300


def test_without_a_prompts_file_the_builtin_prompts_are_used() -> None:
    assert load_prompts(None) == BUILTIN_PROMPTS


def test_a_text_prompts_file_has_one_prompt_per_non_empty_line(tmp_path: Path) -> None:
    path = tmp_path / "prompts.txt"
    path.write_text("first prompt\n\n  second prompt  \n", encoding="utf-8")

    assert load_prompts(str(path)) == ("first prompt", "second prompt")


def test_a_jsonl_prompts_file_holds_strings_or_objects_with_a_prompt(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text('"plain string"\n{"prompt": "from object", "id": 3}\n', encoding="utf-8")

    assert load_prompts(str(path)) == ("plain string", "from object")


@pytest.mark.parametrize(("content", "message"), [
    ("", "no prompts"), ("{not json\n", ":1: not JSON"), ('{"id": 1}\n', ":1: expected"),
])
def test_a_bad_prompts_file_is_refused_with_the_line_at_fault(tmp_path: Path, content: str,
                                                              message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")

    with pytest.raises(ValueError, match=message):
        load_prompts(str(path))


# ------------------------------------------------------------------ streamed (generate_stream)
def sse(*events: dict[str, Any]) -> bytes:
    """Events as Triton writes them: ``data: <json>`` and a blank line each."""
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


def token(text: str, **counts: int) -> dict[str, Any]:
    return {"model_name": "toy-lm-stream", "model_version": "1", "text_output": text, **counts}


def test_a_streamed_triton_request_is_the_generate_extension_body_asking_to_stream() -> None:
    assert triton_stream_request("Hi there", 32) == {"text_input": "Hi there",
                                                     "max_tokens": 32, "stream": True}


def test_the_first_token_is_timed_at_the_chunk_that_completed_its_event() -> None:
    stream = TritonStream()
    first, rest = sse(token("alpha")), sse(token(" beta"), token(" gamma"))

    stream.feed(first[:10], at_ms=3.0)  # half an event: no token yet
    stream.feed(first[10:], at_ms=7.5)
    stream.feed(rest, at_ms=20.0)
    completion = stream.finish()

    assert completion.time_to_first_token == 7.5
    assert completion.text == "alpha beta gamma"
    assert completion.context("p")["num_output_tokens"] == 3
    assert completion.context("p")["tokenizer"] == "whitespace"
    assert completion.context("p")["time_to_first_token"] == 7.5
    assert stream.received_bytes == len(first) + len(rest)


def test_counts_carried_by_the_events_are_taken_from_the_last_that_had_them() -> None:
    stream = TritonStream()
    stream.feed(sse(token("a", num_input_tokens=4, num_output_tokens=1),
                    token(" b", num_input_tokens=4, num_output_tokens=2)), at_ms=1.0)

    context = stream.finish().context("ignored prompt")

    assert (context["num_input_tokens"], context["num_output_tokens"], context["tokenizer"]) == (
        4, 2, "server")


def test_events_without_text_do_not_count_as_the_first_token() -> None:
    stream = TritonStream()
    stream.feed(b": keep-alive\n\n" + sse({"model_name": "m", "text_output": ""}), at_ms=1.0)
    stream.feed(sse(token("late")), at_ms=9.0)

    assert stream.finish().time_to_first_token == 9.0


def test_an_error_event_fails_the_stream_with_the_servers_message() -> None:
    stream = TritonStream()
    stream.feed(sse(token("a"), {"error": "model crashed mid-stream"}), at_ms=1.0)

    with pytest.raises(ResponseError, match="stream error: model crashed mid-stream"):
        stream.finish()


@pytest.mark.parametrize("body", [b"", b"data: {}\n\n", b"data: not json\n\n",
                                  b"data: [1, 2]\n\n", b'data: {"text_output": "x"}'])
def test_a_stream_without_a_complete_token_event_is_not_a_completion(body: bytes) -> None:
    stream = TritonStream()
    stream.feed(body, at_ms=1.0)

    with pytest.raises(ResponseError):
        stream.finish()


def test_an_endless_line_is_refused_instead_of_buffered() -> None:
    stream = TritonStream()

    with pytest.raises(ResponseError, match="broken event stream"):
        stream.feed(b"data: " + b"x" * MAX_EVENT_CHARS, at_ms=1.0)
