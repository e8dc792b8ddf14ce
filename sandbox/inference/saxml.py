"""A stand-in for the Saxml HTTP proxy (``sax-http``) that fronts Sax on GKE.

Google's Saxml-on-GKE tooling puts a small HTTP server before the Sax cell; load
tests and demos talk to its ``/generate``. This serves that endpoint with the
toy LM, so a load generator written for the proxy runs unchanged against the
sandbox::

    POST /generate
    {"model": "/sax/test/toy", "query": "prompt text",
     "extra_inputs": {"per_example_max_decode_steps": 8}}

    200 {"generate_response": [["<generated text>", -2.0]],
         "num_input_tokens": 2, "num_output_tokens": 8}

``generate_response`` is what the proxy returns from Sax's ``LM.Generate``: a
list of ``[text, score]`` pairs (one here). The stdlib version of the proxy
wraps it in that key, as here; the later FastAPI version returns the bare list.
The token counts are extra keys a client of the real proxy ignores; they save
a load generator from re-tokenising the text.

``extra_inputs`` is optional. The number of tokens comes from
``per_example_max_decode_steps`` (the proxy's name) or ``max_tokens``; the first
wins if both are given; default 16, clamped to 1..256. Other decoding knobs
(``temperature``, ``per_example_top_k``, ``per_example_top_p``) are accepted and
ignored: the toy model is deterministic. Any model name is served.

Errors are JSON ``{"error": "..."}``: 400 for a body that is not a JSON object
or lacks a string ``model`` or ``query``, 404 for an unknown path. ``GET /``
answers the proxy's banner, ``{"message": "HTTP Server for SAX Client"}``.

The server binds its port when constructed but only listens once ``listen()``
is called: the port is reserved early (a clash fails fast), while connections
are refused until the caller says the whole service is ready.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandbox.httpserver import ApiHttpServer, ApiRequestHandler
from sandbox.inference import toy_lm

__all__ = ["BadRequestError", "GenerateRequest", "SaxmlApi", "SaxmlHttpServer",
           "parse_generate"]


BANNER = {"message": "HTTP Server for SAX Client"}
_MAX_BODY = 1 << 20
# Checked in order: the proxy's own name first.
_MAX_TOKENS_KEYS = ("per_example_max_decode_steps", "max_tokens")


class BadRequestError(ValueError):
    """The request body cannot be served; the message goes back to the client."""


@dataclass(frozen=True)
class GenerateRequest:
    model: str
    query: str
    max_tokens: int | None = None


def _integer(name: str, value: object) -> int:
    # JSON has one number type; 8.0 is accepted as 8 the way the proxy's pydantic
    # model would, but true/false and fractions are not token counts.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequestError(f"extra_inputs.{name} must be an integer")
    if isinstance(value, float) and not value.is_integer():
        raise BadRequestError(f"extra_inputs.{name} must be an integer")
    return int(value)


def parse_generate(body: bytes) -> GenerateRequest:
    """Validate a ``/generate`` body; raises ``BadRequestError``."""
    try:
        params = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BadRequestError(f"body is not valid JSON: {error}") from None
    if not isinstance(params, dict):
        raise BadRequestError("body must be a JSON object")
    for key in ("model", "query"):
        if not isinstance(params.get(key), str):
            raise BadRequestError(f"{key!r} is required and must be a string")
    extra = params.get("extra_inputs")
    if extra is None:
        extra = {}
    if not isinstance(extra, dict):
        raise BadRequestError("extra_inputs must be a JSON object")
    max_tokens = next((_integer(key, extra[key]) for key in _MAX_TOKENS_KEYS
                       if extra.get(key) is not None), None)
    return GenerateRequest(model=params["model"], query=params["query"],
                           max_tokens=max_tokens)


@dataclass
class SaxmlApi:
    """What the handler calls: generation plus the simulated decode time."""

    ms_per_token: float = 1.0
    sleep: Callable[[float], None] = field(default=time.sleep)

    def generate(self, request: GenerateRequest) -> dict[str, Any]:
        generation = toy_lm.generate(request.query, request.max_tokens)
        self.sleep(toy_lm.generation_seconds(generation.num_output_tokens, self.ms_per_token))
        return {
            "generate_response": [[generation.text, generation.score]],
            "num_input_tokens": generation.num_input_tokens,
            "num_output_tokens": generation.num_output_tokens,
        }


class SaxmlHttpServer(ApiHttpServer[SaxmlApi]):
    """Bound on construction; accepts connections only after ``listen()``."""

    def __init__(self, port: int, api: SaxmlApi, host: str = "127.0.0.1") -> None:
        self._listening = False
        super().__init__((host, port), api, _Handler)

    def server_activate(self) -> None:
        # socketserver calls this from __init__; deferring listen() keeps the port
        # refusing connections, so "port accepts" can mean "service is ready".
        if self._listening:
            super().server_activate()

    def listen(self) -> None:
        """Start accepting connections and serve them on a background thread."""
        self._listening = True
        self.server_activate()
        self.serve_in_background("saxml-http")

    def close(self) -> None:
        if self._listening:
            super().close()
        else:
            # Never served: shutdown() would wait for a serve_forever() that never ran.
            self.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class _Handler(ApiRequestHandler):
    server: SaxmlHttpServer
    server_version = "sandbox-saxml-http"

    def do_GET(self) -> None:
        if self._drain() is None:
            return
        if self.path == "/":
            self._reply(200, BANNER)
        else:
            self._reply(404, {"error": f"no such path: {self.path}"})

    def do_POST(self) -> None:
        body = self._drain()
        if body is None:
            return
        if self.path != "/generate":
            self._reply(404, {"error": f"no such path: {self.path}"})
            return
        try:
            request = parse_generate(body)
        except BadRequestError as error:
            self._reply(400, {"error": str(error)})
            return
        self._reply(200, self.server.api.generate(request))

    def _drain(self) -> bytes | None:
        """Read the body; None (after answering 413) if it is too large to read."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > _MAX_BODY:
            self.close_connection = True
            self._reply(413 if length > 0 else 400, {"error": "bad Content-Length"})
            return None
        return self.rfile.read(length) if length else b""

    def _reply(self, code: int, body: object) -> None:
        self.send_body(code, json.dumps(body).encode("utf-8"), "application/json")
