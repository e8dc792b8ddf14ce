"""Locust users that send one LLM generation request after another.

Each user is closed-loop (no wait between requests): the number of users is the
number of requests in flight, which is what a serving benchmark varies. A request
fails when the response is not 2xx or carries no completion. What the metrics plugin
cannot see from the HTTP exchange (model, method, token counts, server-reported time)
travels in the request's ``context``, which Locust hands to ``events.request``.

``--server`` picks which class runs (see ``metrics_plugin.select_user_classes``); each
class names its protocol in ``server``.

``--stream`` (Triton only) sends ``generate_stream`` instead of ``infer`` and reads the
server-sent events as they arrive (``protocols.TritonStream``). Locust stops its clock
when the response headers arrive if the body is streamed, so the user keeps its own:
``response_time`` is from just before sending to the end of the stream, and
``time_to_first_token`` from the same moment to the chunk that completed the first event
with text. Both replace what Locust measured before the request event fires. The same
clock times every later event with text (the inter-token latencies) and the end of the
stream, from which ``time_per_output_token`` follows (``token_timing``).
"""

from __future__ import annotations

import random
import time
from typing import Any, ClassVar

from locust import HttpUser, constant, task

from .protocols import (
    Completion,
    ResponseError,
    TritonStream,
    error_text,
    load_prompts,
    parse_saxml,
    parse_triton,
    saxml_request,
    triton_request,
    triton_stream_request,
    whitespace_tokens,
)
from .settings import Settings, settings_from

__all__ = ["MISSING_SAXML_MODEL", "MISSING_TRITON_MODEL", "SaxmlUser", "TritonUser"]

# Targets of --bad-request-ratio: names no deployment serves.
MISSING_TRITON_MODEL = "loadgen-no-such-model"
MISSING_SAXML_MODEL = "/sax/loadgen/no-such-model"


class _GenerationUser(HttpUser):
    """Shared loop: pick a prompt and a model, send, judge the response."""

    abstract = True
    wait_time = constant(0)
    server: ClassVar[str] = ""
    model_method: ClassVar[str] = ""
    missing_model: ClassVar[str] = ""

    settings: Settings
    prompts: tuple[str, ...]

    def on_start(self) -> None:
        # Read here, not at import: on a distributed worker the master's options arrive
        # just before the test starts.
        self.settings = settings_from(self.environment.parsed_options)
        self.prompts = load_prompts(self.settings.prompts_file)

    def _target_model(self) -> str:
        ratio = self.settings.bad_request_ratio
        if ratio > 0 and random.random() < ratio:  # noqa: S311 - load mix, not security
            return self.missing_model
        return self.settings.model

    def _context(self, model: str, prompt: str, method: str) -> dict[str, Any]:
        return {"model_name": model, "model_method": method,
                "tokenizer": "whitespace", "num_input_tokens": whitespace_tokens(prompt)}

    def _send(self, path: str, body: dict[str, Any], model: str, prompt: str) -> None:
        context = self._context(model, prompt, self.model_method)
        with self.client.post(path, json=body, name=path, catch_response=True,
                              context=context) as response:
            if response.error is not None or response.status_code == 0:
                return  # connection error: Locust records it as the exception
            if not response.ok:
                response.failure(error_text(response.status_code, response.content or b""))
                return
            try:
                completion = self.parse(response.json())
            except (ValueError, ResponseError) as exc:
                # requests' JSONDecodeError is a ValueError too.
                response.failure(f"unusable response: {exc}")
                return
            # Locust copies ``context`` into the event it fires when this block ends.
            response.request_meta["context"].update(completion.context(prompt))

    def parse(self, body: Any) -> Completion:
        raise NotImplementedError


class TritonUser(_GenerationUser):
    """Triton Inference Server, HTTP/JSON v2 protocol (``/v2/models/{model}/infer``), or
    with ``--stream`` its generate extension (``/v2/models/{model}/generate_stream``)."""

    server = "triton"
    model_method = "infer"
    missing_model = MISSING_TRITON_MODEL

    @task
    def infer(self) -> None:
        prompt = random.choice(self.prompts)  # noqa: S311
        model = self._target_model()
        if self.settings.stream:
            self._stream(model, prompt)
            return
        self._send(f"/v2/models/{model}/infer", triton_request(prompt, self.settings.max_tokens),
                   model, prompt)

    def parse(self, body: Any) -> Completion:
        return parse_triton(body)

    def _stream(self, model: str, prompt: str) -> None:
        path = f"/v2/models/{model}/generate_stream"
        body = triton_stream_request(prompt, self.settings.max_tokens)
        context = self._context(model, prompt, "generate_stream")
        sent = time.perf_counter()
        with self.client.post(path, json=body, name=path, catch_response=True, context=context,
                              stream=True, headers={"Accept": "text/event-stream"}) as response:
            if response.error is not None or response.status_code == 0:
                return  # connection error: Locust records it as the exception
            if not response.ok:
                response.failure(error_text(response.status_code, response.content or b""))
                return
            stream = TritonStream()
            ended: float | None = None
            try:
                for chunk in response.iter_content(chunk_size=None):
                    stream.feed(chunk, (time.perf_counter() - sent) * 1000.0)
                # One reading for the response time and the end of the stream, so
                # time per output token is (response_time - TTFT) / (tokens - 1) exactly.
                ended = (time.perf_counter() - sent) * 1000.0
                completion = stream.finish(ended)
            except OSError as exc:
                # requests' errors for a connection lost mid-stream are OSErrors.
                response.failure(f"stream interrupted: {type(exc).__name__}: {exc}")
                return
            except ResponseError as exc:
                response.failure(str(exc))
                return
            finally:
                meta = response.request_meta
                meta["response_time"] = (ended if ended is not None
                                         else (time.perf_counter() - sent) * 1000.0)
                meta["response_length"] = stream.received_bytes
            meta["context"].update(completion.context(prompt))


class SaxmlUser(_GenerationUser):
    """A Saxml HTTP proxy (``POST /generate``)."""

    server = "saxml"
    model_method = "generate"
    missing_model = MISSING_SAXML_MODEL

    @task
    def generate(self) -> None:
        prompt = random.choice(self.prompts)  # noqa: S311
        model = self._target_model()
        self._send("/generate", saxml_request(model, prompt, self.settings.max_tokens),
                   model, prompt)

    def parse(self, body: Any) -> Completion:
        return parse_saxml(body)
