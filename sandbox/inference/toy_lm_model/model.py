"""The toy LM as a Triton Python-backend model (``model.py`` of a model repository).

This file runs inside Triton's ``triton_python_backend_stub``, copied out of the
project into a model repository (a bucket, then a release snapshot), so it imports
nothing from the project: the few lines of generation are repeated from
``sandbox/inference/toy_lm.py`` and a unit test holds the two to the same text for
the same prompt. Only the standard library, numpy and ``triton_python_backend_utils``
(provided by the stub) are used.

``BROKEN``, ``VERSION_LABEL`` and ``MS_PER_TOKEN`` are rewritten by
``toy_lm_model.model_files`` to produce a version that fails to load (``initialize``
raises, so Triton refuses the model and, with ``--exit-on-error=true``, exits), to tell
uploads apart in the server log without changing the text the model generates, and to
make a version that answers the same text more slowly (a release a canary must catch).
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]

BROKEN = False
VERSION_LABEL = "v1"
# Time "generating" costs per output token, as on an accelerator: a batch takes as long
# as its longest generation.
MS_PER_TOKEN = 2.0

DEFAULT_MAX_TOKENS = 16
MIN_TOKENS = 1
MAX_TOKENS_LIMIT = 256
VOCABULARY = (
    "accelerator", "batch", "cache", "chip", "cluster", "compile", "core", "decode",
    "device", "embed", "epoch", "fabric", "flops", "gradient", "graph", "host",
    "inference", "kernel", "layer", "latency", "matrix", "memory", "mesh", "model",
    "node", "optimizer", "parameter", "pipeline", "pod", "prefill", "queue", "replica",
    "router", "scheduler", "shard", "slice", "softmax", "stream", "tensor", "token",
    "topology", "tpu", "train", "vector", "weight", "warmup", "worker", "zone",
)
_BYTES_PER_WORD = 2


def generate(prompt: str, max_tokens: int | None = None) -> tuple[str, int, int]:
    """(text, num_input_tokens, num_output_tokens): the same completion as
    ``toy_lm.generate`` -- SHAKE-256 of the prompt picks each word."""
    count = DEFAULT_MAX_TOKENS if max_tokens is None else max(
        MIN_TOKENS, min(MAX_TOKENS_LIMIT, int(max_tokens)))
    stream = hashlib.shake_256(prompt.encode("utf-8", errors="surrogatepass")).digest(
        count * _BYTES_PER_WORD)
    words = [
        VOCABULARY[int.from_bytes(stream[i:i + _BYTES_PER_WORD], "big") % len(VOCABULARY)]
        for i in range(0, len(stream), _BYTES_PER_WORD)
    ]
    return " ".join(words), len(prompt.split()), count


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def answer(prompts: list[object], limits: list[int | None]) -> dict[str, Any]:
    """One request's outputs as numpy arrays of shape ``[rows, 1]``."""
    if len(limits) != len(prompts):
        raise ValueError(f"max_tokens has {len(limits)} rows, text_input {len(prompts)}")
    generations = [generate(_text(p), limit) for p, limit in zip(prompts, limits, strict=True)]
    rows = len(generations)
    return {
        "text_output": np.array([g[0].encode("utf-8") for g in generations],
                                dtype=np.object_).reshape(rows, 1),
        "num_input_tokens": np.array([g[1] for g in generations],
                                     dtype=np.int32).reshape(rows, 1),
        "num_output_tokens": np.array([g[2] for g in generations],
                                      dtype=np.int32).reshape(rows, 1),
    }


class TritonPythonModel:
    """Triton's entry point: ``initialize`` once per instance, ``execute`` per batch."""

    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        label = config.get("parameters", {}).get("version_label", {}).get("string_value")
        if BROKEN:
            raise RuntimeError(
                f"toy-lm {VERSION_LABEL} is broken on purpose: this version must not load")
        pb_utils.Logger.log_info(
            f"toy-lm {VERSION_LABEL} loaded (config version_label={label})")

    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        longest = 0
        for request in requests:
            try:
                prompts = list(
                    pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()
                    .reshape(-1))
                max_tokens = pb_utils.get_input_tensor_by_name(request, "max_tokens")
                limits: list[int | None] = (
                    [None] * len(prompts) if max_tokens is None
                    else [int(v) for v in max_tokens.as_numpy().reshape(-1)])
                outputs = answer(prompts, limits)
            except ValueError as exc:
                responses.append(pb_utils.InferenceResponse(
                    output_tensors=[], error=pb_utils.TritonError(str(exc))))
                continue
            longest = max(longest, int(outputs["num_output_tokens"].max()))
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor(name, value) for name, value in outputs.items()]))
        time.sleep(MS_PER_TOKEN * longest / 1000.0)
        return responses
