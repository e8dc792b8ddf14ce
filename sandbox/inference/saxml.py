"""A stand-in for the Saxml HTTP proxy (``sax-http``) that fronts Sax on GKE.

Google's Saxml-on-GKE tooling puts a small HTTP server before the Sax cell
(``saxml-on-gke/httpserver/http_server.py`` in GoogleCloudPlatform/ai-on-gke):
load tests talk to its ``/generate``, deployments to its admin endpoints. This
serves the same requests, generating with the toy LM, so a load generator or a
rollout written for the proxy runs unchanged against the sandbox::

    POST /generate  {"model": "/sax/test/toy", "query": "prompt text",
                     "extra_inputs": {"per_example_max_decode_steps": 8}}
      200 {"generate_response": [["<generated text>", -2.0]],
           "num_input_tokens": 2, "num_output_tokens": 8}
    POST /publish   {"model": M, "model_path": P, "checkpoint": C, "replicas": N}
      200 {"model": M, "path": P, "checkpoint": C, "replicas": N}
    PUT  /update    (the same body and answer)
    POST /unpublish {"model": M}                      200 {"model": M}
    GET  /listcell  {"model": M}   (a JSON body on a GET, as the proxy reads it)
      200 {"model": M, "model_path": P, "checkpoint": C,
           "max_replicas": N, "active_replicas": N}
    GET  /listall   {"sax_cell": "/sax/test"}         200 ["/sax/test/toy", ...]
    GET  /                                            200 {"message": "HTTP Server for SAX Client"}

What the admin endpoints mean -- when a published model becomes servable, what
``active_replicas`` counts, how a checkpoint fails to load -- is the Sax admin's
business; see ``sandbox.inference.saxml_admin``. ``/listall`` comes from the
proxy's later (FastAPI) version and its README; everything else follows the
stdlib version, including its answers: 200 with the proxy's echo, and for every
failure 400 ``{"Error": "<the exception's text>"}`` (the FastAPI version answers
500 ``{"detail": ...}`` instead). Admin errors are Go's rendering of Sax's
canonical errors, e.g. ``model /sax/test/x not found: rpc error: code = NotFound
desc = NotFound``. (What the Python client wraps around that text -- a
status-code prefix or suffix -- depends on its pybind11_abseil version; clients
match on the status and the ``Error`` key.) The proxy checks the number of keys
of a body (``Provide model for unpublish``...) and answers a missing key with
Python's ``str(KeyError)``, as here. A path or method it does not serve is 400
``{"message": "Invalid Request"}``.

``generate_response`` is what the proxy returns from Sax's ``LM.Generate``: a
list of ``[text, score]`` pairs (one here). The token counts are extra keys a
client of the real proxy ignores; they save a load generator from re-tokenising
the text. ``extra_inputs`` is optional. The number of tokens comes from
``per_example_max_decode_steps`` (the proxy's name) or ``max_tokens``; the first
wins if both are given; default 16, clamped to 1..256. Other decoding knobs
(``temperature``, ``per_example_top_k``, ``per_example_top_p``) are accepted and
ignored: the toy model is deterministic. A body that is not a JSON object or
lacks a string ``model`` or ``query`` is 400 ``{"Error": ...}`` (the real proxy,
given broken JSON, drops the connection).

``SaxmlApi.models`` are published (one replica, checkpoint ``None``) and loaded
when the server starts; by default ``/sax/test/toy``, what ``accelops loadtest
--server saxml`` sends. A model that is not published is refused as the real
proxy refuses it: it calls ``sax.ListDetail(model)`` before generating, so the
answer is the admin's ``model ... not found`` (or its invalid-name message).

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

from sandbox.common.httpserver import ApiHttpServer, ApiRequestHandler
from sandbox.inference import toy_lm
from sandbox.inference.saxml_admin import (
    BadRequestError,
    SaxmlAdmin,
    UnknownModelError,
    check_full_name,
    params,
    parse_spec,
)

__all__ = ["DEFAULT_MODELS", "DEFAULT_MODEL_PATH", "BadRequestError", "GenerateRequest",
           "NotServedError", "SaxmlApi", "SaxmlHttpServer", "UnknownModelError", "check_model_path",
           "parse_generate"]


BANNER = {"message": "HTTP Server for SAX Client"}
INVALID = {"message": "Invalid Request"}
DEFAULT_MODELS: frozenset[str] = frozenset({"/sax/test/toy"})
#: The model path listcell reports for the models a target starts with (Sax's test LM).
DEFAULT_MODEL_PATH = "saxml.server.pax.lm.params.lm_cloud.LmCloudSpmd2BTest"
# Sax's rule for cell and model names (saxml/common/naming.go).
_NAME = re.compile(r"^[a-z]+[a-z0-9-_]*$")
_MAX_BODY = 1 << 20
# Checked in order: the proxy's own name first.
_MAX_TOKENS_KEYS = ("per_example_max_decode_steps", "max_tokens")


class NotServedError(Exception):
    """A path or method the proxy has no handler for."""


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
        value = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BadRequestError(f"body is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise BadRequestError("body must be a JSON object")
    for key in ("model", "query"):
        if not isinstance(value.get(key), str):
            raise BadRequestError(f"{key!r} is required and must be a string")
    extra = value.get("extra_inputs")
    if extra is None:
        extra = {}
    if not isinstance(extra, dict):
        raise BadRequestError("extra_inputs must be a JSON object")
    max_tokens = next((_integer(key, extra[key]) for key in _MAX_TOKENS_KEYS
                       if extra.get(key) is not None), None)
    return GenerateRequest(model=value["model"], query=value["query"], max_tokens=max_tokens)


@dataclass
class SaxmlApi:
    """What the handler calls: the admin, generation and the simulated decode time."""

    ms_per_token: float = 1.0
    sleep: Callable[[float], None] = field(default=time.sleep)
    #: Published and loaded at start; others can be published through ``/publish``.
    models: frozenset[str] = DEFAULT_MODELS
    #: Real seconds from publishing a model until its replicas have loaded it.
    load_seconds: float = 1.0
    #: How long ``/generate`` waits for a published model to become servable.
    pending_seconds: float = 30.0
    admin: SaxmlAdmin = field(init=False)

    def __post_init__(self) -> None:
        self.admin = SaxmlAdmin(load_seconds=self.load_seconds)
        for model in self.models:
            self.admin.preload(check_model_path(model), DEFAULT_MODEL_PATH)

    def generate(self, request: GenerateRequest) -> dict[str, Any]:
        """The proxy's answer for a servable model; raises BadRequestError otherwise
        (UnknownModelError if it is not published)."""
        try:
            check_model_path(request.model)
        except ValueError as error:
            raise UnknownModelError(str(error)) from None
        self.admin.await_servable(request.model, self.pending_seconds)
        generation = toy_lm.generate(request.query, request.max_tokens)
        self.sleep(toy_lm.generation_seconds(generation.num_output_tokens, self.ms_per_token))
        return {
            "generate_response": [[generation.text, generation.score]],
            "num_input_tokens": generation.num_input_tokens,
            "num_output_tokens": generation.num_output_tokens,
        }

    def handle(self, method: str, path: str, body: bytes) -> Any:
        """The 200 answer of one request; BadRequestError for 400 ``{"Error": ...}``;
        NotServedError for a path or method the proxy does not serve."""
        if (method, path) == ("POST", "/generate"):
            return self.generate(parse_generate(body))
        if (method, path) in (("POST", "/publish"), ("PUT", "/update")):
            verb = path.lstrip("/")
            spec = parse_spec(body, verb)
            (self.admin.publish if verb == "publish" else self.admin.update)(spec)
            return {"model": spec.model, "path": spec.model_path,
                    "checkpoint": spec.checkpoint, "replicas": spec.replicas}
        if (method, path) == ("POST", "/unpublish"):
            model = params(body, ("model",), "Provide model for unpublish")["model"]
            self.admin.unpublish(model)
            return {"model": model}
        if (method, path) == ("GET", "/listcell"):
            model = params(body, ("model",), "Provide model for list cell")["model"]
            return self.admin.list_detail(check_full_name(model))
        if (method, path) == ("GET", "/listall"):
            cell = params(body, ("sax_cell",), "Provide sax_cell for listall")["sax_cell"]
            return self.admin.list_all(cell)
        if (method, path) == ("GET", "/"):
            return BANNER
        raise NotServedError(f"{method} {path}")


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
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def _serve(self, method: str) -> None:
        body = self._drain()
        if body is None:
            return
        try:
            answer = self.server.api.handle(method, self.path, body)
        except BadRequestError as error:
            # The proxy's error_res: every failure, unknown models included.
            self._reply(400, {"Error": str(error)})
        except NotServedError:
            self._reply(400, INVALID)
        else:
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
