"""Per-job timelines from what the cluster and GKE recorded (pure).

Used by the demo and the benchmarks: queue wait (submitted → admitted by Kueue),
provisioning (admitted → every pod running), run time, chip-hours; per slice the
latency from admission to the create request and the idle time between the job's
end and the delete request of its pool; and per job how far apart its slices were
requested and became ready.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.jobspec.labels import JOBSET_NAME_LABEL
from shared.names import pool_name
from shared.slices.lifecycle import running_at
from shared.slices.observe import parse_time

__all__ = ["JobTimeline", "SliceTimeline", "build_timelines"]

ADMITTED_AT = "sandbox.accelops.dev/admitted-at"


@dataclass(frozen=True, slots=True)
class SliceTimeline:
    pool: str
    create_requested: float | None
    ready: float | None
    delete_requested: float | None
    deleted: float | None


@dataclass(frozen=True, slots=True)
class JobTimeline:
    namespace: str
    name: str
    tpu_type: str
    chips: int
    submitted: float
    admitted: float | None
    running: float | None
    finished: float | None
    outcome: str | None
    slices: tuple[SliceTimeline, ...]

    @property
    def queue_wait(self) -> float | None:
        return None if self.admitted is None else self.admitted - self.submitted

    @property
    def provisioning(self) -> float | None:
        if self.admitted is None or self.running is None:
            return None
        return self.running - self.admitted

    @property
    def run_time(self) -> float | None:
        if self.running is None or self.finished is None:
            return None
        return self.finished - self.running

    @property
    def chip_hours(self) -> float | None:
        run = self.run_time
        return None if run is None else self.chips * run / 3600

    def idle(self, piece: SliceTimeline) -> float | None:
        """Seconds between the job's end and the delete request of the slice's pool."""
        if self.finished is None or piece.delete_requested is None:
            return None
        return piece.delete_requested - self.finished

    def admission_to_create(self, piece: SliceTimeline) -> float | None:
        if self.admitted is None or piece.create_requested is None:
            return None
        return piece.create_requested - self.admitted

    @property
    def create_spread(self) -> float | None:
        """Seconds from the first slice's create request to the last one's."""
        return _spread([piece.create_requested for piece in self.slices])

    @property
    def ready_spread(self) -> float | None:
        """Seconds from the first slice's pool ready to the last one's: the job runs
        only once every slice is there, so the early ones wait this long, idle."""
        return _spread([piece.ready for piece in self.slices])


def _spread(moments: list[float | None]) -> float | None:
    known = [m for m in moments if m is not None]
    if not known or len(known) < len(moments):
        return None
    return max(known) - min(known)


_Span = tuple[float | None, float | None]


def _operation_times(operations: list[dict[str, Any]]) -> dict[tuple[str, str], _Span]:
    """(pool, CREATE|DELETE) -> (start, end) of the latest such operation."""
    times: dict[tuple[str, str], _Span] = {}
    for op in operations:
        kind = str(op.get("operationType", ""))
        verb = "CREATE" if "CREATE" in kind else "DELETE" if "DELETE" in kind else None
        target = str(op.get("targetLink", ""))
        if verb is None or "/nodePools/" not in target:
            continue
        pool = target.rsplit("/nodePools/", 1)[1]
        times[(pool, verb)] = (parse_time(op.get("startTime")), parse_time(op.get("endTime")))
    return times


def build_timelines(jobsets: list[dict[str, Any]], pods: list[dict[str, Any]],
                    operations: list[dict[str, Any]]) -> list[JobTimeline]:
    ops = _operation_times(operations)
    pods_of: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        meta = pod["metadata"]
        owner = (meta.get("labels") or {}).get(JOBSET_NAME_LABEL)
        if owner:
            pods_of.setdefault(f"{meta['namespace']}/{owner}", []).append(pod)
    timelines = []
    for jobset in jobsets:
        meta, spec = jobset["metadata"], jobset["spec"]["replicatedJobs"][0]
        annotations = meta.get("annotations") or {}
        job = spec["template"]["spec"]
        chips_per_vm = int(job["template"]["spec"]["containers"][0]["resources"]["limits"]
                           .get("google.com/tpu", 0))
        finished, outcome = None, None
        for condition in (jobset.get("status") or {}).get("conditions") or []:
            if condition.get("type") in ("Completed", "Failed") and (
                    condition.get("status") == "True"):
                finished, outcome = parse_time(condition.get("lastTransitionTime")), (
                    condition["type"])
        pieces = []
        for index in range(int(spec.get("replicas", 1))):
            name = pool_name(meta["namespace"], meta["name"], index)
            create = ops.get((name, "CREATE"), (None, None))
            delete = ops.get((name, "DELETE"), (None, None))
            pieces.append(SliceTimeline(name, create[0], create[1], delete[0], delete[1]))
        timelines.append(JobTimeline(
            namespace=meta["namespace"], name=meta["name"],
            tpu_type=annotations.get("accelops.dev/tpu-type", "?"),
            chips=int(spec.get("replicas", 1)) * int(job.get("parallelism", 1)) * chips_per_vm,
            submitted=parse_time(meta.get("creationTimestamp")) or 0.0,
            admitted=parse_time(annotations.get(ADMITTED_AT)),
            # Every pod running, as reconcile_slices reports it: the last container start.
            running=running_at(pods_of.get(f"{meta['namespace']}/{meta['name']}", []),
                               int(spec.get("replicas", 1)) * int(job.get("parallelism", 1))),
            finished=finished, outcome=outcome, slices=tuple(pieces)))
    return sorted(timelines, key=lambda t: (t.submitted, t.name))
