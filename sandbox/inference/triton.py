"""The toy language model behind a real ``tritonserver`` (CPU), via nvidia-pytriton.

pytriton ships the server binary and the Python backend, so load tests hit the
genuine KServe v2 HTTP/gRPC front end, request queue and dynamic batcher rather
than a mock of them. The model callable runs in this process; the backend stub
forwards each batch to it over a local socket.

Request shapes (the model batches, so every input carries a leading batch
dimension; a single prompt is shape ``[1, 1]`` -- ``[1]`` is rejected with 400)::

    POST /v2/models/toy-lm/infer
    {"inputs": [
        {"name": "text_input", "shape": [1, 1], "datatype": "BYTES", "data": ["hello world"]},
        {"name": "max_tokens", "shape": [1, 1], "datatype": "INT32", "data": [8]}
    ]}

    200 {"model_name": "toy-lm", "model_version": "1", "outputs": [
        {"name": "text_output", "datatype": "BYTES", "shape": [1, 1], "data": ["..."]},
        {"name": "num_output_tokens", "datatype": "INT32", "shape": [1, 1], "data": [8]},
        {"name": "num_input_tokens", "datatype": "INT32", "shape": [1, 1], "data": [2]}
    ]}

``max_tokens`` is optional (default 16, clamped to 1..256). Several prompts may
travel in one request (shape ``[n, 1]``, ``max_tokens`` then also ``[n, 1]``).
Readiness: ``GET /v2/health/ready`` answers 200 before the model has loaded;
``GET /v2/models/toy-lm/ready`` is the one to wait for (``wait_until_ready`` waits
for both models).

Streaming: the same toy LM is also served as ``toy-lm-stream``, a *decoupled* model
(``ModelConfig(decoupled=True)``: any number of responses per request), which is
what Triton's generate extension streams as server-sent events::

    POST /v2/models/toy-lm-stream/generate_stream
    {"text_input": "hello world", "max_tokens": 3, "stream": true}

    200 text/event-stream
    data: {"model_name":"toy-lm-stream","model_version":"1","num_input_tokens":2,
           "num_output_tokens":1,"text_output":"decode"}       (one line on the wire)

    data: {...,"num_output_tokens":2,"text_output":" pipeline"}

    data: {...,"num_output_tokens":3,"text_output":" optimizer"}

One event per token, ``ms_per_token`` apart: ``text_output`` is the new token (with
its leading space), the counts are those so far, and the pieces join to the text
``toy-lm`` returns for the same prompt. ``stream`` is an optional BOOL input, false
by default, as in Triton's vLLM and TensorRT-LLM backends: without it the model
answers with one response holding the whole completion, which is also what
``POST .../toy-lm-stream/generate`` (one response expected) needs. Errors before
the stream starts are plain JSON (unknown model: 404); an error after it started
arrives as an event ``data: {"error": "..."}``.

Why a second model rather than ``toy-lm`` itself: Triton's HTTP ``/infer``
refuses decoupled models (501), and the load generator's non-streamed requests
use ``/infer``. The streaming model has no dynamic batcher; each request runs as
its own async generator on pytriton's event loop, so concurrent streams advance
together, token by token, the way an in-flight-batching LLM server interleaves
them (a sync callable would hold the loop and the streams would run one after
another). Triton gives a model without a batcher one request per execution; a
call with several is refused rather than answered out of step.

The backend stub (``triton_python_backend_stub``) links ``libpython3.x.so``
dynamically. With a Python built outside the system prefix (pyenv, for one) the
loader cannot find it and the model fails to load, so the interpreter's
``LIBDIR`` has to be on ``LD_LIBRARY_PATH`` *of the stub*. The stub is a child of
``tritonserver``, which pytriton starts from a copy of ``os.environ``, so adding
the directory to this process's environment before the server starts is enough:
this interpreter is already running and does not need it, and no re-exec is
required.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sysconfig
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from sandbox.common.logtail import log_tail
from sandbox.inference import toy_lm

__all__ = [
    "DEFAULT_MAX_BATCH_SIZE",
    "MODEL_NAME_PATTERN",
    "STREAM_SUFFIX",
    "ToyLmTriton",
    "infer_requests",
    "prepare_stub_environment",
    "stream_requests",
    "stream_responses",
]

log = logging.getLogger(__name__)

MODEL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9._-]+$")
# Enough for the dynamic batcher to coalesce a load test's concurrent users into one
# "generation" step, like an LLM server batching decode steps.
DEFAULT_MAX_BATCH_SIZE = 32
# Bounds how long tritonserver waits for in-flight requests on shutdown.
_EXIT_TIMEOUT_S = 5
# The streaming model's name is the model's with this appended: toy-lm-stream.
STREAM_SUFFIX = "-stream"

Inputs = Mapping[str, npt.NDArray[Any]]
Outputs = dict[str, npt.NDArray[Any]]


def prepare_stub_environment(environ: MutableMapping[str, str] | None = None) -> None:
    """Put this interpreter's ``LIBDIR`` on ``LD_LIBRARY_PATH`` for the backend stub."""
    env = os.environ if environ is None else environ
    libdir = sysconfig.get_config_var("LIBDIR")
    if not libdir or not Path(libdir).is_dir():
        return
    current = [part for part in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if part]
    if libdir not in current:
        env["LD_LIBRARY_PATH"] = os.pathsep.join([libdir, *current])


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _infer_one(request: Inputs) -> tuple[Outputs, int]:
    prompts = request["text_input"].reshape(-1)
    limits: list[int | None]
    if "max_tokens" in request:
        limits = [int(value) for value in request["max_tokens"].reshape(-1)]
    else:
        limits = [None] * len(prompts)
    if len(limits) != len(prompts):
        raise ValueError(f"max_tokens has {len(limits)} rows, text_input {len(prompts)}")
    generations = [toy_lm.generate(_text(p), limit) for p, limit in zip(prompts, limits,
                                                                       strict=True)]
    rows = len(generations)
    outputs: Outputs = {
        "text_output": np.array([g.text.encode("utf-8") for g in generations],
                                dtype=np.object_).reshape(rows, 1),
        "num_output_tokens": np.array([g.num_output_tokens for g in generations],
                                      dtype=np.int32).reshape(rows, 1),
        "num_input_tokens": np.array([g.num_input_tokens for g in generations],
                                     dtype=np.int32).reshape(rows, 1),
    }
    return outputs, max((g.num_output_tokens for g in generations), default=0)


def infer_requests(requests: Sequence[Inputs], ms_per_token: float,
                   sleep: Callable[[float], None] = time.sleep) -> list[Outputs]:
    """Answer one dynamic batch: one output dict per request, in order.

    The whole batch sleeps once, for its longest completion: requests batched
    together finish together, as they do when an LLM server decodes a batch.
    """
    answers = [_infer_one(request) for request in requests]
    longest = max((tokens for _, tokens in answers), default=0)
    sleep(toy_lm.generation_seconds(longest, ms_per_token))
    return [outputs for outputs, _ in answers]


def _first(request: Inputs, name: str) -> Any:
    return request[name].reshape(-1)[0] if name in request else None


def _stream_outputs(text: str, num_input_tokens: int, num_output_tokens: int) -> Outputs:
    return {
        "text_output": np.array([text.encode("utf-8")], dtype=np.object_),
        "num_output_tokens": np.array([num_output_tokens], dtype=np.int32),
        "num_input_tokens": np.array([num_input_tokens], dtype=np.int32),
    }


def stream_responses(request: Inputs) -> list[Outputs]:
    """What the streaming model sends for one request, in order: one response per token
    when its ``stream`` input is true, else one response with the whole completion."""
    limit = _first(request, "max_tokens")
    generation = toy_lm.generate(_text(_first(request, "text_input")),
                                 None if limit is None else int(limit))
    streamed = _first(request, "stream")
    if streamed is None or not bool(streamed):
        return [_stream_outputs(generation.text, generation.num_input_tokens,
                                generation.num_output_tokens)]
    return [_stream_outputs(piece, generation.num_input_tokens, count)
            for count, piece in enumerate(toy_lm.pieces(generation.text), start=1)]


async def stream_requests(
        requests: Sequence[Inputs], ms_per_token: float,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AsyncIterator[list[Outputs]]:
    """The streaming model's callable: one list of responses (one per request) per step.

    Each response leaves once its tokens are "generated": a token every
    ``ms_per_token`` when streamed, the whole completion's time otherwise. Raises
    ValueError for a call with other than one request (see the module docstring).
    """
    if len(requests) != 1:
        raise ValueError(f"the streaming model takes one request per call, got {len(requests)}")
    responses = stream_responses(requests[0])
    tokens = int(responses[-1]["num_output_tokens"][0])
    step = toy_lm.generation_seconds(tokens, ms_per_token) / len(responses)
    for outputs in responses:
        await sleep(step)
        yield [outputs]


class ToyLmTriton:
    """One tritonserver on 127.0.0.1 serving the toy LM under ``model_name``, and
    streamed under ``model_name + STREAM_SUFFIX``."""

    def __init__(self, *, model_name: str, http_port: int, grpc_port: int,
                 ms_per_token: float, workspace: Path, log_file: Path,
                 max_batch_size: int = DEFAULT_MAX_BATCH_SIZE) -> None:
        if not MODEL_NAME_PATTERN.match(model_name):
            raise ValueError(f"invalid model name {model_name!r}")
        self.model_name = model_name
        self.stream_model_name = model_name + STREAM_SUFFIX
        self.http_port = http_port
        self.grpc_port = grpc_port
        self.ms_per_token = ms_per_token
        self.workspace = workspace
        self.log_file = log_file
        self.max_batch_size = max_batch_size
        self._triton: Any = None

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def start(self) -> None:
        """Launch tritonserver and load the model; returns when pytriton has connected.

        Must be called from a thread that outlives the server: pytriton starts
        tritonserver with ``PR_SET_PDEATHSIG``, which fires when the *thread* that
        forked it exits.
        """
        # Imported here so the pure parts of this module (and the Saxml stand-in)
        # do not pay for pytriton's import.
        from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
        from pytriton.triton import Triton, TritonConfig

        prepare_stub_environment()
        config = TritonConfig(
            http_address="127.0.0.1", http_port=self.http_port,
            grpc_address="127.0.0.1", grpc_port=self.grpc_port,
            allow_metrics=False, allow_sagemaker=False, allow_vertex_ai=False,
            log_file=self.log_file, log_verbose=0, exit_timeout_secs=_EXIT_TIMEOUT_S,
        )
        self._triton = Triton(config=config, workspace=self.workspace)
        ms_per_token = self.ms_per_token

        def infer(requests: Sequence[Inputs]) -> list[Outputs]:
            return infer_requests(requests, ms_per_token)

        self._triton.bind(
            model_name=self.model_name,
            infer_func=infer,
            inputs=[
                Tensor(name="text_input", dtype=bytes, shape=(1,)),
                Tensor(name="max_tokens", dtype=np.int32, shape=(1,), optional=True),
            ],
            outputs=[
                Tensor(name="text_output", dtype=bytes, shape=(1,)),
                Tensor(name="num_output_tokens", dtype=np.int32, shape=(1,)),
                Tensor(name="num_input_tokens", dtype=np.int32, shape=(1,)),
            ],
            config=ModelConfig(
                batching=True,
                max_batch_size=self.max_batch_size,
                # No queue delay: a lone request is not held back waiting for company;
                # requests that arrive while a batch runs are coalesced into the next.
                batcher=DynamicBatcher(max_queue_delay_microseconds=0),
            ),
        )

        async def stream(requests: Sequence[Inputs]) -> AsyncIterator[list[Outputs]]:
            async for responses in stream_requests(requests, ms_per_token):
                yield responses

        self._triton.bind(
            model_name=self.stream_model_name,
            infer_func=stream,
            inputs=[
                Tensor(name="text_input", dtype=bytes, shape=(1,)),
                Tensor(name="max_tokens", dtype=np.int32, shape=(1,), optional=True),
                Tensor(name="stream", dtype=np.bool_, shape=(1,), optional=True),
            ],
            outputs=[
                Tensor(name="text_output", dtype=bytes, shape=(1,)),
                Tensor(name="num_output_tokens", dtype=np.int32, shape=(1,)),
                Tensor(name="num_input_tokens", dtype=np.int32, shape=(1,)),
            ],
            config=ModelConfig(batching=False, decoupled=True),
        )
        self._triton.run()

    def model_ready(self, model_name: str | None = None) -> bool:
        """``GET /v2/models/NAME/ready`` answers 200 (NAME: the non-streaming model)."""
        url = f"{self.http_url}/v2/models/{model_name or self.model_name}/ready"
        try:
            with urllib.request.urlopen(url, timeout=1.0) as response:  # noqa: S310
                return int(response.status) == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_until_ready(self, timeout: float, *,
                         progress: Callable[[float], None] | None = None,
                         every: float = 5.0) -> bool:
        """Poll until both models are ready (True), or the server exits or ``timeout``
        passes (False); ``progress`` gets the seconds waited so far every ``every``."""
        started = time.monotonic()
        reported = started
        while True:
            if self.model_ready() and self.model_ready(self.stream_model_name):
                return True
            now = time.monotonic()
            if now - started >= timeout or not self.is_alive():
                return False
            if progress is not None and now - reported >= every:
                reported = now
                progress(now - started)
            time.sleep(0.05)

    def is_alive(self) -> bool:
        return self._triton is not None and bool(self._triton.is_alive())

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log_file, lines)

    def stop(self) -> None:
        """Stop tritonserver (SIGINT, then kill after a grace period) and clean up."""
        if self._triton is not None:
            self._triton.stop()
