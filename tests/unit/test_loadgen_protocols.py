"""Triton and Saxml request bodies, and what the load generator reads from responses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.loadgen.protocols import (
    BUILTIN_PROMPTS,
    ResponseError,
    error_text,
    load_prompts,
    parse_saxml,
    parse_triton,
    saxml_request,
    triton_request,
)


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
                                         "tokenizer": "server", "model_response_time": None}


def test_triton_text_without_counts_is_counted_by_whitespace() -> None:
    completion = parse_triton(triton_response(text_output="one two  three\nfour"))

    assert completion.context("five six") == {"num_input_tokens": 2, "num_output_tokens": 4,
                                              "tokenizer": "whitespace",
                                              "model_response_time": None}


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
