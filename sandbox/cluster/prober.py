"""The process kubelet's prober: one thread that runs due probes in a small pool.

Probes must not block the simulation's pass thread (a probe may wait up to its
``timeoutSeconds`` on a hung process), so one ``sandbox-prober`` thread looks
every 50 ms for due probes and hands them to a pool of four workers; at most
one probe per container and kind is in flight. Results only update the
container's :class:`~sandbox.cluster.probes.ProbeTracker` (and flag a liveness
or startup kill); whenever a verdict flips, a process exits, a crash back-off
is over or a process slot is free for a waiting container, ``notify`` wakes
the pass thread, which writes the store. ``inline`` runs probes on the caller
of :meth:`Prober.tick` instead, for tests that drive time themselves.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from sandbox.cluster.containerstate import ContainerState
from sandbox.cluster.probes import Prober, ProbeTracker

__all__ = ["ProberLoop"]

log = logging.getLogger(__name__)

TICK = 0.05
WORKERS = 4


class ProberLoop:
    """Runs the probes of the containers ``containers()`` returns; see the module docstring."""

    def __init__(
        self,
        lock: threading.RLock,
        containers: Callable[[], Iterable[ContainerState]],
        slot_free: Callable[[], bool],
        *,
        prober: Prober,
        notify: Callable[[], None],
        monotonic: Callable[[], float],
        inline: bool = False,
    ) -> None:
        self._lock = lock
        self._containers = containers
        self._slot_free = slot_free
        self._prober = prober
        self._notify = notify
        self._monotonic = monotonic
        self._inline = inline
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._executor: ThreadPoolExecutor | None = None

    def ensure_running(self) -> None:
        """Start the thread and pool, unless running or inline."""
        if self._inline or self._thread is not None:
            return
        self._executor = ThreadPoolExecutor(max_workers=WORKERS,
                                            thread_name_prefix="sandbox-probe")
        self._thread = threading.Thread(target=self._run, args=(self._closed,),
                                        name="sandbox-prober", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the thread and the pool; :meth:`ensure_running` may start them again."""
        self._closed.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=5)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        self._closed = threading.Event()

    def _run(self, closed: threading.Event) -> None:
        while not closed.wait(TICK):
            try:
                self.tick()
            except Exception:
                log.exception("probing sandbox containers failed")

    def tick(self) -> None:
        """One round: start due probes; wake a pass when the kubelet has work."""
        now = self._monotonic()
        wake = False
        due: list[tuple[ContainerState, ProbeTracker]] = []
        with self._lock:
            free = self._slot_free()
            for container in self._containers():
                process = container.process
                if process is None:
                    if container.simulated or container.final is not None:
                        continue
                    waiting = (container.waiting or ("",))[0]
                    wake |= (container.restart_at is not None and now >= container.restart_at) \
                        or (waiting == "ContainerCreating" and free)
                    continue
                if not process.alive():
                    wake |= not container.exit_seen
                    container.exit_seen = True
                    continue
                for tracker in container.active_trackers():
                    if tracker.due(now):
                        tracker.in_flight = True
                        due.append((container, tracker))
        for container, tracker in due:
            if self._inline or self._executor is None:
                self._probe(container, tracker)
            else:
                self._executor.submit(self._probe, container, tracker)
        if wake:
            self._notify()

    def _probe(self, container: ContainerState, tracker: ProbeTracker) -> None:
        try:
            ok = self._prober(tracker.spec, container.host_port(tracker.spec))
        except Exception:
            log.exception("probe of container %s failed to run", container.name)
            ok = False
        with self._lock:
            changed = tracker.record(ok, self._monotonic())
            if tracker.exhausted and tracker is not container.readiness \
                    and container.process is not None:
                container.kill_requested = True
        if changed:
            self._notify()
