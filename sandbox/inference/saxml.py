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
ignored: the toy model is deterministic.

Only published models are served: ``SaxmlApi.models``, by default
``/sax/test/toy`` (what ``accelops loadtest --server saxml`` sends by default).
Any other model is an error, as on the real proxy, which calls
``sax.ListDetail(model)`` before generating and answers any exception with
``error_res``: HTTP 400 and ``{"Error": "<the exception's text>"}``. This is
the stdlib version of ``saxml-on-gke/httpserver/http_server.py`` in
GoogleCloudPlatform/ai-on-gke, the same version whose ``generate_response``
envelope is copied above (its FastAPI successor answers 500 ``{"detail": ...}``
instead). The text is what Sax's admin server says for a model it does not
know, ``model /sax/test/x not found`` followed by Go's rendering of Sax's
canonical NotFound error; a model path that is not ``/sax/<cell>/<model>`` gets
the admin's invalid-name message. (What the Python client wraps around that
text -- a status-code prefix or suffix -- depends on its pybind11_abseil
version; clients match on the status and the ``Error`` key.) The other
``/generate`` errors use the same shape: 400 ``{"Error": ...}`` for a body that
is not a JSON object or lacks a string ``model`` or ``query`` (where the real
proxy, given broken JSON, drops the connection). Outside ``/generate``: 404
``{"error": ...}`` for an unknown path, and ``GET /`` answers the proxy's
banner, ``{"message": "HTTP Server for SAX Client"}``.

The server binds its port when constructed but only listens once ``listen()``
is called: the port is reserved early (a clash fails fast), while connections
are refused until the caller says the whole service is ready.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandbox.httpserver import ApiHttpServer, ApiRequestHandler
from sandbox.inference import toy_lm

__all__ = ["DEFAULT_MODELS", "BadRequestError", "GenerateRequest", "SaxmlApi",
           "SaxmlHttpServer", "UnknownModelError", "check_model_path", "parse_generate"]


BANNER = {"message": "HTTP Server for SAX Client"}
DEFAULT_MODELS: frozenset[str] = frozenset({"/sax/test/toy"})
# Sax's rule for cell and model names (saxml/common/naming.go).
_NAME = re.compile(r"^[a-z]+[a-z0-9-_]*$")
# How Go prints Sax's canonical ErrNotFound, which the admin server wraps.
_NOT_FOUND = "rpc error: code = NotFound desc = NotFound"
_MAX_BODY = 1 << 20
# Checked in order: the proxy's own name first.
_MAX_TOKENS_KEYS = ("per_example_max_decode_steps", "max_tokens")


class BadRequestError(ValueError):
    """The request body cannot be served; the message goes back to the client."""


class UnknownModelError(BadRequestError):
    """The model is not published (or its path is not a Sax model path)."""


def check_model_path(path: str) -> str:
    """``path`` if it is a Sax model path ``/sax/<cell>/<model>``; ValueError otherwise,
    in the admin server's words."""
    parts = path.split("/")
    if len(parts) != 4 or parts[:2] != ["", "sax"] or not all(
            _NAME.match(part) for part in parts[2:]):
        raise ValueError(f"model full name {path!r} should have the form "
                         "/sax/<cell name>/<model name>, names matching "
                         f"{_NAME.pattern!r}")
    return path


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
    #: The published model paths; a request for any other is refused.
    models: frozenset[str] = DEFAULT_MODELS

    def generate(self, request: GenerateRequest) -> dict[str, Any]:
        """The proxy's answer for a published model; raises UnknownModelError otherwise."""
        if request.model not in self.models:
            try:
                check_model_path(request.model)
            except ValueError as error:
                raise UnknownModelError(str(error)) from None
            raise UnknownModelError(f"model {request.model} not found: {_NOT_FOUND}")
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
            answer = self.server.api.generate(parse_generate(body))
        except BadRequestError as error:
            # The proxy's error_res: every failure of /generate, unknown models included.
            self._reply(400, {"Error": str(error)})
            return
        self._reply(200, answer)

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
