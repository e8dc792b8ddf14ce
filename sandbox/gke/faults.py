"""Fault injection for the sandbox GKE API.

Retry, back-off and failure handling are only trustworthy if tests can make them
run. Two kinds of faults:

* **request faults** — the next ``count`` matching requests
  (:meth:`FaultInjector.fail_next`), or every matching request for a simulated
  duration (:meth:`FaultInjector.fail_for`, "GKE answers 429 for the next five
  simulated minutes"), answer a Google error body and change nothing;
* **pool errors** — :meth:`FaultInjector.fail_next_create_with_pool_error`: the next
  node pool created is accepted, but its operation ends DONE with an error and the
  pool in status ERROR with no nodes (a TPU stockout);
* **stockout windows** — :meth:`FaultInjector.stockout_for`: every node pool whose
  create is accepted during the window fails that way, with GKE's stockout message
  (or, ``reason="quota"``, its quota message); creates accepted after it succeed.

* **latency** — :meth:`FaultInjector.set_latency`: every Container API request
  waits that many *real* seconds before it is handled (the simulated clock is
  not involved: the point is the wall-clock cost of many calls, e.g. a benchmark
  of a sweep over many pools with 100 ms per call). Requests are served on
  threads, so concurrent requests wait at the same time, as calls to the real
  API overlap; a client that calls in parallel pays the latency about once per
  round, one that calls in sequence once per call.

A cluster-level operation (a control-plane upgrade that blocks node-pool
operations) is an operation, not a request fault: :meth:`GkeState.upgrade_for
<sandbox.gke.state.GkeState.upgrade_for>`.

Node disruptions are not request faults either: :meth:`GkeState.disrupt
<sandbox.gke.state.GkeState.disrupt>` preempts a Spot VM of a pool, or runs a host
maintenance event on every VM of a pool (a TPU slice); the cluster simulation ends
the pods there as the kubelet's graceful node shutdown does (``DisruptionTarget``)
and brings the nodes back later (:mod:`sandbox.cluster.disruptions`).

Stockout wording: GKE's "Troubleshoot node pools" page lists "The zone does not
have enough resources available to fulfill the request. Try a different zone, or
try again later." with the codes GCE_STOCKOUT / ZONE_RESOURCE_POOL_EXHAUSTED, and
Compute Engine names the zone as ``'projects/P/zones/Z'``; its TPU page quotes
"Insufficient quota to satisfy the request". How GKE joins code and text in the
operation's error, the rest of the quota sentence and the operation's error code
(RESOURCE_EXHAUSTED) are ours. The window applies when the create is accepted (GKE
asks Compute Engine for the VMs at the start of the operation); the failure shows
when the operation ends.

By default request faults hit mutations only (POST and DELETE); pass
``methods=None`` for every method. Only Container API paths (``/v1/...``) are
affected, never the sandbox control surface.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from sandbox.common.clock import SimClock
from sandbox.gke.errors import GkeError, resolve_status

__all__ = ["DEFAULT_POOL_ERROR", "QUOTA_MESSAGE", "STOCKOUT_MESSAGE", "Fault",
           "FaultInjector", "PoolError", "Stockout"]

MUTATING = ("POST", "DELETE")

_DEFAULT_MESSAGES = {
    "RESOURCE_EXHAUSTED": "Quota exceeded for quota metric 'Mutate requests' and limit "
                          "'Mutate requests per minute per project' of service "
                          "'container.googleapis.com' (injected fault).",
    "UNAVAILABLE": "The service is currently unavailable (injected fault).",
    "INTERNAL": "Internal error encountered (injected fault).",
    "FAILED_PRECONDITION": "Cluster is running incompatible operation (injected fault).",
    "DEADLINE_EXCEEDED": "The request timed out (injected fault).",
    "PERMISSION_DENIED": "Required 'container.clusters.update' permission (injected fault).",
}

DEFAULT_POOL_ERROR = (
    "Instances failed to create: GCE_STOCKOUT: The zone does not have enough resources "
    "available to fulfill the request. Try a different zone, or try again later "
    "(injected fault)."
)

#: A stockout window's message; ``{project}``, ``{zone}``, ``{region}`` and
#: ``{machine_type}`` are filled in for each pool.
STOCKOUT_MESSAGE = (
    "GCE_STOCKOUT: The zone 'projects/{project}/zones/{zone}' does not have enough "
    "resources available to fulfill the request. Try a different zone, or try again later."
)
QUOTA_MESSAGE = (
    "Insufficient quota to satisfy the request: quota exceeded for machine type "
    "{machine_type} in region {region}."
)
_WINDOW_MESSAGES = {"stockout": STOCKOUT_MESSAGE, "quota": QUOTA_MESSAGE}


@dataclass
class Fault:
    """One armed request fault: a countdown (``remaining``) or a deadline (``until``)."""

    status: str
    http_code: int
    message: str
    methods: frozenset[str] | None
    path_contains: str | None
    remaining: int | None = None  # requests still to fail (fail_next)
    until: float | None = None  # simulated time it expires (fail_for)

    def matches(self, method: str, path: str) -> bool:
        if self.methods is not None and method.upper() not in self.methods:
            return False
        return self.path_contains is None or self.path_contains in path

    def error(self) -> GkeError:
        return GkeError(self.status, self.message, self.http_code)


@dataclass(frozen=True)
class PoolError:
    """How the next created pool fails: operation error status and message."""

    status: str = "RESOURCE_EXHAUSTED"
    message: str = DEFAULT_POOL_ERROR


@dataclass
class Stockout:
    """A window of simulated time in which every node pool created ends in ERROR."""

    reason: str  # "stockout" or "quota"
    status: str
    message: str  # template, see STOCKOUT_MESSAGE
    until: float  # simulated time it ends
    cluster: str | None = None  # cluster name or path; None: every cluster

    def matches(self, cluster_path: str) -> bool:
        return self.cluster is None or self.cluster in (
            cluster_path, cluster_path.rsplit("/", 1)[-1])

    def pool_error(self, cluster_path: str, machine_type: str) -> PoolError:
        parts = cluster_path.split("/")  # projects/P/locations/L/clusters/C
        project, zone = parts[1], parts[3]
        region = zone.rsplit("-", 1)[0] if zone.count("-") >= 2 else zone
        return PoolError(self.status, self.message.format(
            project=project, zone=zone, region=region, machine_type=machine_type))


class FaultInjector:
    """Thread-safe armed faults, consulted once per Container API request."""

    def __init__(self, clock: SimClock) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._pool_errors: list[PoolError] = []
        self._stockouts: list[Stockout] = []
        self._latency = 0.0
        #: Requests answered with an injected error so far.
        self.injected = 0

    def _fault(self, status: str | None, http_code: int | None,
               methods: Iterable[str] | None, message: str | None,
               path_contains: str | None) -> Fault:
        status, http_code = resolve_status(status, http_code)
        return Fault(
            status=status,
            http_code=http_code,
            message=message or _DEFAULT_MESSAGES.get(status, f"{status} (injected fault)."),
            methods=None if methods is None else frozenset(m.upper() for m in methods),
            path_contains=path_contains,
        )

    def fail_next(self, count: int = 1, status: str | None = None,
                  http_code: int | None = None, *,
                  methods: Iterable[str] | None = MUTATING, message: str | None = None,
                  path_contains: str | None = None) -> Fault:
        """Answer the next ``count`` matching requests with an error.

        ``status`` / ``http_code``: give either or both (default RESOURCE_EXHAUSTED /
        429); the missing half follows Google's mapping.
        """
        if count < 1:
            raise ValueError("count must be at least 1")
        fault = self._fault(status, http_code, methods, message, path_contains)
        fault.remaining = count
        with self._lock:
            self._faults.append(fault)
        return fault

    def fail_for(self, sim_seconds: float, status: str | None = None,
                 http_code: int | None = None, *,
                 methods: Iterable[str] | None = MUTATING, message: str | None = None,
                 path_contains: str | None = None) -> Fault:
        """Answer every matching request with an error for ``sim_seconds`` simulated seconds."""
        if sim_seconds <= 0:
            raise ValueError("sim_seconds must be positive")
        fault = self._fault(status, http_code, methods, message, path_contains)
        fault.until = self.clock.time() + sim_seconds
        with self._lock:
            self._faults.append(fault)
        return fault

    def fail_next_create_with_pool_error(self, count: int = 1, *,
                                         status: str = "RESOURCE_EXHAUSTED",
                                         message: str = DEFAULT_POOL_ERROR) -> None:
        """The next ``count`` created pools end in ERROR (operation DONE with an error)."""
        if count < 1:
            raise ValueError("count must be at least 1")
        resolve_status(status, None)  # validates the name
        with self._lock:
            self._pool_errors.extend(PoolError(status.upper(), message) for _ in range(count))

    def stockout_for(self, sim_seconds: float, *, reason: str = "stockout",
                     cluster: str | None = None, message: str | None = None,
                     status: str = "RESOURCE_EXHAUSTED") -> Stockout:
        """Every node pool created in the next ``sim_seconds`` ends in ERROR.

        ``reason``: ``"stockout"`` (GCE_STOCKOUT) or ``"quota"`` (insufficient
        quota); ``cluster``: a cluster name or path (default: every cluster);
        ``message``: a template overriding the reason's (see STOCKOUT_MESSAGE).
        """
        if sim_seconds <= 0:
            raise ValueError("sim_seconds must be positive")
        if reason not in _WINDOW_MESSAGES:
            raise ValueError(f"reason must be one of {sorted(_WINDOW_MESSAGES)}, not {reason!r}")
        status, _ = resolve_status(status, None)
        window = Stockout(reason, status, message or _WINDOW_MESSAGES[reason],
                          self.clock.time() + sim_seconds, cluster)
        with self._lock:
            self._stockouts.append(window)
        return window

    def set_latency(self, seconds: float) -> None:
        """Delay every Container API request by ``seconds`` real seconds (0: none).

        Raises ValueError for a negative or non-finite value.
        """
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"latency must be a non-negative number of seconds, not {seconds}")
        with self._lock:
            self._latency = float(seconds)

    @property
    def latency(self) -> float:
        """Real seconds every Container API request waits (0.0: none)."""
        with self._lock:
            return self._latency

    def take_pool_error(self, cluster_path: str | None = None,
                        machine_type: str = "") -> PoolError | None:
        """How a create accepted now fails, or None (the state calls this on each create).

        An armed count comes first (and is consumed); then a stockout window
        covering ``cluster_path`` now.
        """
        now = self.clock.time()
        with self._lock:
            if self._pool_errors:
                return self._pool_errors.pop(0)
            self._stockouts = [w for w in self._stockouts if w.until > now]
            for window in self._stockouts:
                if cluster_path is not None and window.matches(cluster_path):
                    return window.pool_error(cluster_path, machine_type)
        return None

    def stockouts(self) -> list[Stockout]:
        """The stockout windows still open (copies)."""
        now = self.clock.time()
        with self._lock:
            return [Stockout(**vars(w)) for w in self._stockouts if w.until > now]

    def check(self, method: str, path: str) -> GkeError | None:
        """The error to answer this request with, or None; consumes one count."""
        now = self.clock.time()
        with self._lock:
            self._faults = [f for f in self._faults if f.until is None or f.until > now]
            for fault in self._faults:
                if not fault.matches(method, path):
                    continue
                if fault.remaining is not None:
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                self.injected += 1
                return fault.error()
        return None

    def armed(self) -> list[Fault]:
        """The faults still armed (copies), expired ones dropped."""
        now = self.clock.time()
        with self._lock:
            return [Fault(**vars(f)) for f in self._faults
                    if f.until is None or f.until > now]

    def pending_pool_errors(self) -> int:
        with self._lock:
            return len(self._pool_errors)

    def clear(self) -> None:
        """Disarm every request fault, pool error and stockout window; no latency.

        Running operations (an injected upgrade) are not faults: they end on their own.
        """
        with self._lock:
            self._faults.clear()
            self._pool_errors.clear()
            self._stockouts.clear()
            self._latency = 0.0
