"""The inference HTTP protocols: request bodies, and what a response says.

* Triton's KServe v2 JSON ``POST /v2/models/{model}/infer``: inputs ``text_input``
  (BYTES) and ``max_tokens`` (INT32); outputs ``text_output`` and, when the model
  reports them, ``num_input_tokens`` / ``num_output_tokens``.
* Triton's generate extension, streamed: ``POST /v2/models/{model}/generate_stream``
  with ``{"text_input", "max_tokens", "stream": true}`` (``stream`` is the input the
  vLLM and TensorRT-LLM backends, and the sandbox's toy model, stream on) answers
  server-sent events, one JSON object each, whose ``text_output`` is the next piece
  of the completion. :class:`TritonStream` reads them as they arrive: the time of
  the first event with text is the time to first token, the gaps between successive
  events with text the inter-token latencies (:mod:`services.loadgen.token_timing`);
  the pieces joined are the completion; ``num_output_tokens`` / ``num_input_tokens``,
  when events carry them, are taken from the last that did (counts so far, so the
  last is the total). An event ``{"error": ...}`` fails the request, as does a stream
  without any text.
* The Saxml HTTP proxy's ``POST /generate`` with ``{"model", "query",
  "extra_inputs"}``; proxies differ in what they return (a list of ``[text, score]``
  pairs, the same under ``generate_response``, an object with the text under some
  other key, a bare string), so the parser looks for the first generated text rather
  than one exact shape, and takes ``num_input_tokens`` / ``num_output_tokens`` from
  the object when present.

Token counts the server does not report are counted by splitting on whitespace and
recorded as tokenizer ``whitespace`` (``server`` when the server reported the output
count). A time the server reports as ``model_response_time_ms`` (Triton: in the
response ``parameters``; Saxml: a key of the response object) becomes the record's
``model_response_time``.

Pure functions: the Locust user classes call them, tests call them directly.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .sse import SseDecoder, SseError
from .token_timing import TokenClock, time_per_output_token

__all__ = [
    "BUILTIN_PROMPTS",
    "Completion",
    "ResponseError",
    "TritonStream",
    "error_text",
    "load_prompts",
    "parse_saxml",
    "parse_triton",
    "saxml_request",
    "triton_request",
    "triton_stream_request",
    "whitespace_tokens",
]

BUILTIN_PROMPTS: tuple[str, ...] = (
    "Explain in two sentences what a TPU is.",
    "Write a haiku about autumn rain.",
    "What is the capital of Australia, and why was it chosen?",
    "Summarise the plot of Hamlet for a ten-year-old.",
    "List three ways to reduce the latency of a web service.",
    "Translate 'good morning, how are you?' into French and Spanish.",
    "Why is the sky blue? Answer briefly.",
    "Give a Python one-liner that reverses a string.",
)
_TEXT_KEYS = ("generate_response", "text", "generated_text", "output_text", "text_output",
              "output", "outputs", "response", "responses", "predictions", "results",
              "generations", "samples")
_SERVER_TIME_KEY = "model_response_time_ms"


class ResponseError(ValueError):
    """A 2xx response that does not carry a completion."""


@dataclass(frozen=True, slots=True)
class Completion:
    """What one response says about the generation."""

    text: str | None
    num_input_tokens: int | None
    num_output_tokens: int | None
    model_response_time: float | None  # ms, as the server reported
    # ms from sending the request to the first token; streamed requests only.
    time_to_first_token: float | None = None
    # ms from sending the request to the end of the stream; streamed requests only.
    stream_end: float | None = None
    # ms between successive events that carried text (at most the record's bound).
    inter_token_latencies: tuple[float, ...] = ()

    def context(self, prompt: str) -> dict[str, Any]:
        """The request-context fields for the record; missing counts by whitespace.

        Time per output token needs the output count, so it is computed here, from the
        same count the record carries (the server's, else the whitespace count).
        """
        output = self.num_output_tokens
        tokenizer = "server"
        if output is None:
            tokenizer = "whitespace"
            output = whitespace_tokens(self.text) if self.text is not None else None
        inputs = self.num_input_tokens
        if inputs is None:
            inputs = whitespace_tokens(prompt)
        return {"num_input_tokens": inputs, "num_output_tokens": output,
                "tokenizer": tokenizer, "model_response_time": self.model_response_time,
                "time_to_first_token": self.time_to_first_token,
                "time_per_output_token": time_per_output_token(
                    self.time_to_first_token, self.stream_end, output),
                "inter_token_latencies": list(self.inter_token_latencies)}


def whitespace_tokens(text: str) -> int:
    return len(text.split())


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _millis(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _first(value: Any) -> Any:
    """The first scalar of a (possibly nested) tensor data list."""
    while isinstance(value, list):
        if not value:
            return None
        value = value[0]
    return value


# ------------------------------------------------------------------ Triton (KServe v2)
def triton_request(prompt: str, max_tokens: int) -> dict[str, Any]:
    return {"inputs": [
        {"name": "text_input", "shape": [1, 1], "datatype": "BYTES", "data": [prompt]},
        {"name": "max_tokens", "shape": [1, 1], "datatype": "INT32", "data": [max_tokens]},
    ]}


def parse_triton(body: Any) -> Completion:
    """Read a v2 inference response. Raises ResponseError when it has no outputs."""
    if not isinstance(body, Mapping):
        raise ResponseError("response is not a JSON object")
    outputs = body.get("outputs")
    if not isinstance(outputs, list) or not outputs:
        raise ResponseError("response has no outputs")
    by_name = {out.get("name"): _first(out.get("data")) for out in outputs
               if isinstance(out, Mapping)}
    text = by_name.get("text_output")
    parameters = body.get("parameters")
    server_time = (_millis(parameters.get(_SERVER_TIME_KEY))
                   if isinstance(parameters, Mapping) else None)
    return Completion(
        text=text if isinstance(text, str) else None,
        num_input_tokens=_count(by_name.get("num_input_tokens")),
        num_output_tokens=_count(by_name.get("num_output_tokens")),
        model_response_time=server_time,
    )


# ------------------------------------------------------------------ Triton, streamed
def triton_stream_request(prompt: str, max_tokens: int) -> dict[str, Any]:
    """The generate extension's body: one JSON key per model input."""
    return {"text_input": prompt, "max_tokens": max_tokens, "stream": True}


@dataclass
class TritonStream:
    """One ``generate_stream`` response, read chunk by chunk as it arrives."""

    received_bytes: int = 0
    events: int = 0
    _clock: TokenClock = field(default_factory=TokenClock, repr=False)
    _decoder: SseDecoder = field(default_factory=SseDecoder, repr=False)
    _pieces: list[str] = field(default_factory=list, repr=False)
    _num_input_tokens: int | None = None
    _num_output_tokens: int | None = None
    _error: str | None = None

    def feed(self, chunk: bytes, at_ms: float) -> None:
        """Take the next chunk, received ``at_ms`` after the request was sent.

        Raises ResponseError when the bytes are not an event stream.
        """
        self.received_bytes += len(chunk)
        try:
            events = self._decoder.feed(chunk)
        except SseError as exc:
            raise ResponseError(f"broken event stream: {exc}") from exc
        for data in events:
            self._event(data, at_ms)

    def _event(self, data: str, at_ms: float) -> None:
        if not data.strip():
            return
        self.events += 1
        try:
            body = json.loads(data)
        except ValueError:
            body = None
        if not isinstance(body, Mapping):
            self._error = self._error or f"event is not a JSON object: {data[:100]!r}"
            return
        if "error" in body:
            self._error = self._error or str(body["error"])
            return
        text = _first(body.get("text_output"))
        if isinstance(text, str) and text:
            self._clock.token(at_ms)
            self._pieces.append(text)
        for key in ("num_input_tokens", "num_output_tokens"):
            if (count := _count(_first(body.get(key)))) is not None:
                setattr(self, f"_{key}", count)

    @property
    def first_token_ms(self) -> float | None:
        """When the first event with text arrived (ms after sending), if one has."""
        return self._clock.first_ms

    def finish(self, end_ms: float | None = None) -> Completion:
        """The completion once the stream has ended, ``end_ms`` after the request was
        sent (default: when the last token arrived). Raises ResponseError when an event
        reported an error, or no event carried text: a failed request records no token
        timings at all, not those of the tokens before the error."""
        if self._error is not None:
            raise ResponseError(f"stream error: {self._error}")
        clock = self._clock
        if clock.first_ms is None:
            raise ResponseError(f"stream carried no tokens ({self.events} events)")
        return Completion(
            text="".join(self._pieces),
            num_input_tokens=self._num_input_tokens,
            num_output_tokens=self._num_output_tokens,
            model_response_time=None,
            time_to_first_token=clock.first_ms,
            stream_end=clock.last_ms if end_ms is None else max(end_ms, clock.last_ms or 0.0),
            inter_token_latencies=tuple(clock.gaps),
        )


# ------------------------------------------------------------------ Saxml HTTP proxy
def saxml_request(model: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    # ``per_example_max_decode_steps`` is the proxy's own name for the limit; the
    # same value as ``max_tokens`` so either reading of it gets the same length.
    return {"model": model, "query": prompt,
            "extra_inputs": {"max_tokens": max_tokens, "per_example_max_decode_steps": max_tokens}}


def _find_text(value: Any, depth: int = 0) -> str | None:
    """The first generated text in a response of unknown shape."""
    if depth > 6:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for key in _TEXT_KEYS:
            if key in value and (found := _find_text(value[key], depth + 1)) is not None:
                return found
        return None
    if isinstance(value, list | tuple):
        # [[text, score], ...] or [text, ...] or [{"text": ...}, ...]: first candidate wins.
        for item in value:
            if (found := _find_text(item, depth + 1)) is not None:
                return found
    return None


def parse_saxml(body: Any) -> Completion:
    """Read a Saxml proxy response. Raises ResponseError when it carries no text."""
    counts: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    text = _find_text(body)
    output = _count(counts.get("num_output_tokens"))
    if text is None and output is None:
        raise ResponseError("response carries no generated text")
    return Completion(
        text=text,
        num_input_tokens=_count(counts.get("num_input_tokens")),
        num_output_tokens=output,
        model_response_time=_millis(counts.get(_SERVER_TIME_KEY)),
    )


def error_text(status: int, body: bytes, limit: int = 300) -> str:
    """A short failure message: the status and the server's own error, if it gave one
    (Triton: ``error``; the Saxml proxy: ``Error``, or ``detail`` from its FastAPI
    version)."""
    detail = body.decode("utf-8", "replace").strip()
    try:
        parsed = json.loads(detail)
    except ValueError:
        parsed = None
    if isinstance(parsed, Mapping):
        for key in ("error", "Error", "detail", "message"):
            if isinstance(parsed.get(key), str):
                detail = parsed[key]
                break
    return f"HTTP {status}: {detail}"[:limit] if detail else f"HTTP {status}"


# ------------------------------------------------------------------ prompts
def _prompts_from_lines(lines: Iterable[str], jsonl: bool, source: str) -> list[str]:
    prompts: list[str] = []
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if not jsonl:
            prompts.append(line)
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{source}:{number}: not JSON: {exc}") from exc
        if isinstance(item, Mapping):
            item = next((item[k] for k in ("prompt", "text", "input") if k in item), None)
        if not isinstance(item, str) or not item.strip():
            raise ValueError(f"{source}:{number}: expected a string or an object with 'prompt'")
        prompts.append(item)
    return prompts


@lru_cache(maxsize=8)
def load_prompts(path: str | None) -> tuple[str, ...]:
    """The prompts of ``path`` (``.jsonl``: JSON per line, else text per line), or the
    built-in ones. Raises ValueError for an empty or malformed file, OSError if unreadable."""
    if path is None:
        return BUILTIN_PROMPTS
    file = Path(path)
    jsonl = file.suffix.lower() in {".jsonl", ".ndjson"}
    prompts = _prompts_from_lines(file.read_text(encoding="utf-8").splitlines(), jsonl, path)
    if not prompts:
        raise ValueError(f"{path}: no prompts")
    return tuple(prompts)
