"""What a job's JobSet says about it, and the small helpers the explanations share (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from shared.errors import PermanentError
from shared.jobspec.labels import (
    ANNOTATION_REQUEST_ID,
    ANNOTATION_TPU_TYPE,
    LABEL_QUEUE,
    LABEL_TEAM,
)
from shared.jobspec.render import REPLICATED_JOB
from shared.jobspec.tpu import TpuShape, lookup
from shared.slices.observe import parse_time

__all__ = ["Facts", "Obj", "clock", "due_in", "jobset_ref", "meta", "parse_time", "read_facts",
           "ready_slices", "restarts_line", "short", "true_condition", "when"]

Obj = Mapping[str, Any]


def meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def jobset_ref(jobset: Obj) -> str:
    return f"{meta(jobset).get('namespace', '')}/{meta(jobset).get('name', '')}"


def when(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def clock(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "an unknown time"


def due_in(seconds: float) -> str:
    if seconds <= 0:
        return "due now"
    if seconds < 90:
        return f"in {seconds:.0f} s"
    return f"in {seconds / 60:.0f} min"


# ---------------------------------------------------------------------------- facts
@dataclass(frozen=True, slots=True)
class Facts:
    """What the JobSet itself says about the job."""

    namespace: str
    name: str
    request_id: str
    team: str | None
    tpu_type: str | None
    shape: TpuShape | None
    slices: int | None
    vms: int
    created_at: datetime | None
    queue: str | None
    restarts: int
    max_restarts: int
    # Restarts JobSet counted against maxRestarts (restartsCountTowardsMax); the others
    # followed a disrupted host (accelops' failure-policy rule does not count those).
    restarts_counted: int = 0


def read_facts(jobset: Obj, teams: Mapping[str, str]) -> Facts:
    metadata = meta(jobset)
    annotations = metadata.get("annotations") or {}
    labels = metadata.get("labels") or {}
    spec = jobset.get("spec") or {}
    replicated = spec.get("replicatedJobs") or []
    job = next((r for r in replicated if r.get("name") == REPLICATED_JOB),
               replicated[0] if replicated else {})
    tpu_type = annotations.get(ANNOTATION_TPU_TYPE)
    shape = None
    if tpu_type:
        try:
            shape = lookup(str(tpu_type))
        except PermanentError:
            shape = None
    parallelism = int(((job.get("template") or {}).get("spec") or {}).get("parallelism") or 1)
    namespace = str(metadata.get("namespace", ""))
    return Facts(
        namespace=namespace, name=str(metadata.get("name", "")),
        request_id=str(annotations.get(ANNOTATION_REQUEST_ID) or metadata.get("name", "")),
        team=teams.get(namespace) or labels.get(LABEL_TEAM),
        tpu_type=str(tpu_type) if tpu_type else None, shape=shape,
        slices=int(job.get("replicas", 1)) if job else None,
        vms=shape.vms if shape else parallelism,
        created_at=when(parse_time(metadata.get("creationTimestamp"))),
        queue=labels.get(LABEL_QUEUE),
        restarts=int((jobset.get("status") or {}).get("restarts") or 0),
        max_restarts=int((spec.get("failurePolicy") or {}).get("maxRestarts") or 0),
        restarts_counted=int((jobset.get("status") or {}).get("restartsCountTowardsMax") or 0),
    )


def restarts_line(facts: Facts) -> str | None:
    """What the JobSet's restarts were for, and whether they spent ``max_restarts``."""
    if not facts.restarts:
        return None
    limit = f"failurePolicy.maxRestarts {facts.max_restarts}"
    disrupted = max(0, facts.restarts - facts.restarts_counted)
    head = f"The JobSet was restarted {facts.restarts} time(s)"
    if not disrupted:
        return f"{head} after a failed pod ({limit})."
    why = "a disrupted host (Spot preemption, maintenance or a lost node)"
    if disrupted == facts.restarts:
        return f"{head} after {why}, which does not count against {limit}."
    return (f"{head}: {disrupted} after {why}, not counted against {limit}, and "
            f"{facts.restarts - disrupted} after a failed pod, counted.")


def true_condition(obj: Obj, *kinds: str) -> Obj | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") in kinds and condition.get("status") == "True":
            return dict(condition)
    return None


def ready_slices(jobset: Obj) -> int:
    return sum(int(r.get("ready") or 0) + int(r.get("succeeded") or 0)
               for r in (jobset.get("status") or {}).get("replicatedJobsStatus") or [])


def short(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


