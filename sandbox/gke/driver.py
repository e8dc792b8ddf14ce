"""The thread that finishes operations as simulated time reaches their due time.

It sleeps on the :class:`~sandbox.common.clock.SimClock` until the next due time, at
most ``max_real`` real seconds at a stretch (so :meth:`OperationDriver.stop` is
prompt and a new, earlier operation is noticed), and wakes at once when a test
calls ``clock.advance()``.
"""

from __future__ import annotations

import logging
import threading

from sandbox.gke.state import GkeState

__all__ = ["OperationDriver"]

log = logging.getLogger(__name__)

_IDLE_HORIZON = 3600.0  # simulated seconds to sleep towards when nothing is running


class OperationDriver:
    """Background completion of a :class:`GkeState`'s operations."""

    def __init__(self, state: GkeState, *, max_real: float = 0.05) -> None:
        self.state = state
        self.max_real = max_real
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> OperationDriver:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="sandbox-gke-operations",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None:
            thread.join(timeout=5)

    @property
    def running(self) -> bool:
        return self._thread is not None

    def _run(self) -> None:
        clock = self.state.clock
        while not self._stop.is_set():
            due = self.state.next_due()
            target = due if due is not None else clock.time() + _IDLE_HORIZON
            clock.sleep_until(target, max_real=self.max_real)
            if self._stop.is_set():
                return
            try:
                self.state.tick()
            except Exception:  # keep driving whatever one observer did
                log.exception("sandbox GKE operation driver failed")
