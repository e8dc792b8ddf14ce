"""The sandbox inference target: a toy LM behind a real Triton server and a Saxml proxy.

Load tests need something that answers like a model server -- real wire
protocols, real queuing and batching, token counts, time that grows with the
output, streamed tokens -- without accelerators, weights or network. ``toy_lm``
is the pure model, ``triton`` serves it from nvidia-pytriton's bundled
tritonserver (CPU; ``toy-lm`` for ``/infer``, the decoupled ``toy-lm-stream`` for
``generate_stream``), ``saxml`` from a stand-in for the Saxml-on-GKE HTTP proxy
that serves only its published models. Run both with ``python -m
sandbox.inference`` (see ``__main__`` for the CLI and readiness).
"""

from __future__ import annotations

from sandbox.inference.saxml import (
    GenerateRequest,
    SaxmlApi,
    SaxmlHttpServer,
    UnknownModelError,
    parse_generate,
)
from sandbox.inference.toy_lm import (
    Generation,
    clamp_max_tokens,
    generate,
    generation_seconds,
    pieces,
)
from sandbox.inference.triton import ToyLmTriton, infer_requests, stream_requests

__all__ = [
    "GenerateRequest",
    "Generation",
    "SaxmlApi",
    "SaxmlHttpServer",
    "ToyLmTriton",
    "UnknownModelError",
    "clamp_max_tokens",
    "generate",
    "generation_seconds",
    "infer_requests",
    "parse_generate",
    "pieces",
    "stream_requests",
]
