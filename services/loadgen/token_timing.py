"""When the tokens of a streamed completion arrived: time to first token, the gaps between
tokens, and time per output token.

The definitions are those of vLLM's serving benchmark and Kubernetes inference-perf,
so numbers compare with theirs:

* **time to first token (TTFT)**: from just before the request is sent to the arrival
  of the first event that carries text;
* **inter-token latencies (ITL)**: the gaps between successive events that carry text,
  one per event after the first. A server that puts several tokens in one event makes
  one gap for them, as vLLM's ITL does for a chunk;
* **time per output token (TPOT)**: ``(end of stream - TTFT) / (output tokens - 1)``,
  the mean time per token after the first; None with fewer than two tokens (nothing
  to average) or without a first token. The output count is the record's own (the
  server's count, else the whitespace count), as vLLM's is its tokenizer's.

Only the first :data:`~shared.metrics.record.MAX_INTER_TOKEN_LATENCIES` gaps are
kept: a record stays far below Pub/Sub's 10 MB message and BigQuery's row limits
whatever ``--max-tokens`` asks for. Later gaps are counted (``TokenClock.events``)
but not kept; TTFT and TPOT cover the whole stream regardless.
Pure: the caller reads the clock and passes the times in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from shared.metrics.record import MAX_INTER_TOKEN_LATENCIES

__all__ = ["MAX_INTER_TOKEN_LATENCIES", "TokenClock", "time_per_output_token"]


@dataclass
class TokenClock:
    """The arrival times of one stream's token events, in ms after the request was sent."""

    limit: int = MAX_INTER_TOKEN_LATENCIES
    first_ms: float | None = None
    last_ms: float | None = None
    events: int = 0
    gaps: list[float] = field(default_factory=list)

    def token(self, at_ms: float) -> None:
        """An event with text arrived ``at_ms`` after sending."""
        self.events += 1
        if self.last_ms is None:
            self.first_ms = self.last_ms = at_ms
            return
        # Chunks are read in order from one clock, but never record a negative gap.
        gap = max(0.0, at_ms - self.last_ms)
        self.last_ms = max(self.last_ms, at_ms)
        if len(self.gaps) < self.limit:
            self.gaps.append(gap)


def time_per_output_token(ttft_ms: float | None, end_ms: float | None,
                          output_tokens: int | None) -> float | None:
    """``(end - TTFT) / (output tokens - 1)`` in ms; None when any input is missing or
    fewer than two tokens were generated."""
    if ttft_ms is None or end_ms is None or output_tokens is None or output_tokens < 2:
        return None
    tpot = max(0.0, end_ms - ttft_ms) / (output_tokens - 1)
    return tpot if math.isfinite(tpot) else None
