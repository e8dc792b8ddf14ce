"""The inference target's request handling, without starting tritonserver."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any

import numpy as np
import pytest

from sandbox.common.httpserver import port_open
from sandbox.inference import toy_lm
from sandbox.inference.saxml import (
    BadRequestError,
    GenerateRequest,
    SaxmlApi,
    SaxmlHttpServer,
    UnknownModelError,
    check_model_path,
    parse_generate,
)
from sandbox.inference.triton import (
    infer_requests,
    prepare_stub_environment,
    stream_requests,
    stream_responses,
)


def _row(prompt: str, max_tokens: int | None = None) -> dict[str, Any]:
    request: dict[str, Any] = {"text_input": np.array([[prompt.encode()]], dtype=np.object_)}
    if max_tokens is not None:
        request["max_tokens"] = np.array([[max_tokens]], dtype=np.int32)
    return request


# ------------------------------------------------------------------- triton callable
def test_each_request_in_a_batch_gets_its_own_completion():
    sleeps: list[float] = []
    first, second = infer_requests([_row("hello world", 8), _row("other")], 1.0, sleeps.append)
    assert first["text_output"].shape == (1, 1)
    assert first["text_output"][0, 0] == toy_lm.generate("hello world", 8).text.encode()
    assert first["num_output_tokens"].tolist() == [[8]]
    assert first["num_input_tokens"].tolist() == [[2]]
    assert first["num_output_tokens"].dtype == np.int32
    assert second["num_output_tokens"].tolist() == [[toy_lm.DEFAULT_MAX_TOKENS]]


def test_a_batch_sleeps_once_for_its_longest_completion():
    sleeps: list[float] = []
    infer_requests([_row("a", 8), _row("b", 32)], 1.0, sleeps.append)
    assert sleeps == [pytest.approx(0.032)]


def test_a_request_may_carry_several_prompts():
    request = {"text_input": np.array([[b"a"], [b"b c"]], dtype=np.object_),
               "max_tokens": np.array([[2], [3]], dtype=np.int32)}
    (outputs,) = infer_requests([request], 0.0, lambda _: None)
    assert outputs["num_output_tokens"].tolist() == [[2], [3]]
    assert outputs["num_input_tokens"].tolist() == [[1], [2]]


# ------------------------------------------------------------------- streaming model
def _stream_row(prompt: str, max_tokens: int | None = None,
                stream: bool | None = None) -> dict[str, Any]:
    """One request as the decoupled (unbatched) model receives it: shape [1] inputs."""
    request: dict[str, Any] = {"text_input": np.array([prompt.encode()], dtype=np.object_)}
    if max_tokens is not None:
        request["max_tokens"] = np.array([max_tokens], dtype=np.int32)
    if stream is not None:
        request["stream"] = np.array([stream], dtype=np.bool_)
    return request


def _collect(requests: list[dict[str, Any]], ms_per_token: float,
             sleeps: list[float]) -> list[list[dict[str, Any]]]:
    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async def run() -> list[list[dict[str, Any]]]:
        return [step async for step in stream_requests(requests, ms_per_token, sleep)]

    return asyncio.run(run())


def test_a_streamed_request_gets_one_response_per_token_that_join_to_the_completion():
    responses = stream_responses(_stream_row("hello world", 5, stream=True))

    texts = [r["text_output"][0].decode() for r in responses]
    assert "".join(texts) == toy_lm.generate("hello world", 5).text
    assert len(texts) == 5
    assert [int(r["num_output_tokens"][0]) for r in responses] == [1, 2, 3, 4, 5]
    assert {int(r["num_input_tokens"][0]) for r in responses} == {2}


def test_without_stream_the_streaming_model_answers_once_with_the_whole_completion():
    (response,) = stream_responses(_stream_row("hello world", 5))

    assert response["text_output"][0].decode() == toy_lm.generate("hello world", 5).text
    assert int(response["num_output_tokens"][0]) == 5
    assert len(stream_responses(_stream_row("hello world", 5, stream=False))) == 1


def test_each_streamed_token_leaves_one_token_time_after_the_last():
    sleeps: list[float] = []
    steps = _collect([_stream_row("x", 4, stream=True)], 2.0, sleeps)

    assert [len(step) for step in steps] == [1, 1, 1, 1]
    assert sleeps == [pytest.approx(0.002)] * 4


def test_an_unstreamed_answer_leaves_after_the_whole_generation_time():
    sleeps: list[float] = []
    steps = _collect([_stream_row("x", 4)], 2.0, sleeps)

    assert len(steps) == 1
    assert sleeps == [pytest.approx(0.008)]


def test_the_streaming_model_refuses_a_call_with_several_requests():
    with pytest.raises(ValueError, match="one request per call"):
        _collect([_stream_row("a", 2, True), _stream_row("b", 2, True)], 0.0, [])


def test_the_stub_library_directory_is_prepended_once():
    env = {"LD_LIBRARY_PATH": "/opt/lib"}
    prepare_stub_environment(env)
    prepare_stub_environment(env)
    parts = env["LD_LIBRARY_PATH"].split(":")
    assert parts[-1] == "/opt/lib"
    assert len(parts) == 2


# ------------------------------------------------------------------- saxml parsing
def test_a_generate_body_is_parsed_with_either_max_tokens_name():
    body = {"model": "/sax/test/toy", "query": "hi", "extra_inputs": {"max_tokens": 8}}
    assert parse_generate(json.dumps(body).encode()).max_tokens == 8
    body["extra_inputs"] = {"per_example_max_decode_steps": 5, "max_tokens": 8,
                            "temperature": 0.5}
    assert parse_generate(json.dumps(body).encode()).max_tokens == 5


def test_extra_inputs_are_optional():
    parsed = parse_generate(b'{"model": "/sax/test/toy", "query": "hi"}')
    assert (parsed.model, parsed.query, parsed.max_tokens) == ("/sax/test/toy", "hi", None)


@pytest.mark.parametrize("body", [
    b"{not json", b"[1, 2]", b'{"model": "/sax/test/toy"}', b'{"query": "hi"}',
    b'{"model": "/sax/test/toy", "query": 7}',
    b'{"model": "m", "query": "q", "extra_inputs": [1]}',
    b'{"model": "m", "query": "q", "extra_inputs": {"max_tokens": "8"}}',
    b'{"model": "m", "query": "q", "extra_inputs": {"max_tokens": 1.5}}',
    b'{"model": "m", "query": "q", "extra_inputs": {"max_tokens": true}}',
])
def test_malformed_generate_bodies_are_rejected(body: bytes):
    with pytest.raises(BadRequestError):
        parse_generate(body)


def test_only_published_models_are_served():
    api = SaxmlApi(ms_per_token=0.0, models=frozenset({"/sax/test/toy", "/sax/prod/lm"}))

    assert api.generate(GenerateRequest("/sax/prod/lm", "hi", 2))["num_output_tokens"] == 2
    with pytest.raises(UnknownModelError, match="model /sax/test/other not found"):
        api.generate(GenerateRequest("/sax/test/other", "hi", 2))


def test_a_request_for_something_that_is_not_a_model_path_gets_the_admins_words():
    with pytest.raises(UnknownModelError, match="should have the form /sax/<cell name>"):
        SaxmlApi().generate(GenerateRequest("toy-lm", "hi"))


@pytest.mark.parametrize("path", ["/sax/test/toy", "/sax/cell-1/llama_7b"])
def test_sax_model_paths_are_accepted(path: str):
    assert check_model_path(path) == path


@pytest.mark.parametrize("path", ["toy", "/sax/test", "/sax/test/toy/extra", "/other/test/toy",
                                  "/sax/Test/toy", "/sax/test/7b"])
def test_anything_else_is_not_a_sax_model_path(path: str):
    with pytest.raises(ValueError, match="should have the form"):
        check_model_path(path)


# ------------------------------------------------------------------- saxml server
def _connects(port: int) -> bool:
    return port_open(port, timeout=1)


def test_the_saxml_port_refuses_connections_until_listen_is_called():
    server = SaxmlHttpServer(0, SaxmlApi(ms_per_token=0.0))
    try:
        assert not _connects(server.port)
        server.listen()
        assert _connects(server.port)
        request = urllib.request.Request(
            f"{server.url}/generate", method="POST",
            data=b'{"model": "/sax/test/toy", "query": "hello world",'
                 b' "extra_inputs": {"max_tokens": 4}}')
        with urllib.request.urlopen(request, timeout=5) as response:
            answer = json.load(response)
        assert answer == {
            "generate_response": [[toy_lm.generate("hello world", 4).text, -1.0]],
            "num_input_tokens": 2,
            "num_output_tokens": 4,
        }
    finally:
        server.close()


def test_an_unknown_model_is_answered_400_with_the_proxys_error_body():
    server = SaxmlHttpServer(0, SaxmlApi(ms_per_token=0.0))
    server.listen()
    try:
        request = urllib.request.Request(
            f"{server.url}/generate", method="POST",
            data=b'{"model": "/sax/test/missing", "query": "hello"}')
        with pytest.raises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(request, timeout=5)
        assert raised.value.code == 400
        assert json.load(raised.value) == {
            "Error": "model /sax/test/missing not found: "
                     "rpc error: code = NotFound desc = NotFound"}
    finally:
        server.close()


def test_a_server_that_never_listened_closes_at_once():
    SaxmlHttpServer(0, SaxmlApi()).close()
