"""Waiting for a sandbox to get somewhere, bounded: benchmarks fail loudly, never hang."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(condition: Callable[[], Any], what: str, timeout: float,
               interval: float = 0.2) -> Any:
    """Poll ``condition`` until it is truthy and return its value; TimeoutError naming
    ``what`` once ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
    return result
