"""The inference target's request handling, without starting tritonserver."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import numpy as np
import pytest

from sandbox.httpserver import port_open
from sandbox.inference import toy_lm
from sandbox.inference.saxml import BadRequestError, SaxmlApi, SaxmlHttpServer, parse_generate
from sandbox.inference.triton import infer_requests, prepare_stub_environment


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


def test_a_server_that_never_listened_closes_at_once():
    SaxmlHttpServer(0, SaxmlApi()).close()
