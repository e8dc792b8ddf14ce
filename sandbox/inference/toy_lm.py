"""A deterministic, dependency-free stand-in for a language model.

Load tests need a target whose answers are cheap to compute, identical on every
run (so a recorded result can be compared with a later one) and sized like a
real model's: the prompt's length in tokens and the number of tokens generated.
The "tokenizer" splits on whitespace and the "model" draws its words from a
fixed vocabulary with a hash of the prompt, so there is no state, no randomness
and nothing to download. A longer ``max_tokens`` extends the same text rather
than changing it, the way greedy decoding does.

Generation time is modelled separately (``generation_seconds``) so the servers
can sleep for it while this module stays pure. A streaming server sends the
completion token by token: ``pieces`` cuts it the way it is sent, so that the
pieces put back together are exactly the text a non-streamed request gets.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "MAX_TOKENS_LIMIT",
    "MIN_TOKENS",
    "VOCABULARY",
    "Generation",
    "clamp_max_tokens",
    "generate",
    "generation_seconds",
    "pieces",
    "tokenize",
]

DEFAULT_MAX_TOKENS = 16
MIN_TOKENS = 1
MAX_TOKENS_LIMIT = 256

VOCABULARY: tuple[str, ...] = (
    "accelerator", "batch", "cache", "chip", "cluster", "compile", "core", "decode",
    "device", "embed", "epoch", "fabric", "flops", "gradient", "graph", "host",
    "inference", "kernel", "layer", "latency", "matrix", "memory", "mesh", "model",
    "node", "optimizer", "parameter", "pipeline", "pod", "prefill", "queue", "replica",
    "router", "scheduler", "shard", "slice", "softmax", "stream", "tensor", "token",
    "topology", "tpu", "train", "vector", "weight", "warmup", "worker", "zone",
)
# Two bytes of hash per word; reducing them modulo the vocabulary size keeps the bias
# negligible for a vocabulary this small.
_BYTES_PER_WORD = 2


@dataclass(frozen=True)
class Generation:
    """One completion: the text and what a serving stack would meter."""

    text: str
    num_input_tokens: int
    num_output_tokens: int
    # A log-probability-like number (negative, longer is lower) for APIs that return one.
    score: float


def tokenize(text: str) -> list[str]:
    """Whitespace tokens: cheap, and countable by any client without a vocabulary file."""
    return text.split()


def clamp_max_tokens(value: int | None) -> int:
    """The number of tokens to generate: ``DEFAULT_MAX_TOKENS`` if unset, else 1..256."""
    if value is None:
        return DEFAULT_MAX_TOKENS
    return max(MIN_TOKENS, min(MAX_TOKENS_LIMIT, int(value)))


def generate(prompt: str, max_tokens: int | None = None) -> Generation:
    """Complete ``prompt`` with exactly ``clamp_max_tokens(max_tokens)`` words."""
    count = clamp_max_tokens(max_tokens)
    # SHAKE is an extendable-output hash: asking for more bytes extends the same
    # stream, which is what makes a longer completion start with the shorter one.
    stream = hashlib.shake_256(prompt.encode("utf-8", errors="surrogatepass")).digest(
        count * _BYTES_PER_WORD
    )
    words = [
        VOCABULARY[int.from_bytes(stream[i:i + _BYTES_PER_WORD], "big") % len(VOCABULARY)]
        for i in range(0, len(stream), _BYTES_PER_WORD)
    ]
    return Generation(
        text=" ".join(words),
        num_input_tokens=len(tokenize(prompt)),
        num_output_tokens=count,
        score=round(-0.25 * count, 4),
    )


def pieces(text: str) -> list[str]:
    """The completion as a stream sends it: one piece per token, each but the first
    with the space before it, so ``"".join(pieces(text)) == text``."""
    words = tokenize(text)
    return words[:1] + [f" {word}" for word in words[1:]]


def generation_seconds(num_output_tokens: int, ms_per_token: float) -> float:
    """How long a server should take to "generate" that many tokens."""
    return max(0.0, ms_per_token) * max(0, num_output_tokens) / 1000.0
