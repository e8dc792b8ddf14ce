"""Team policy: may this team run this request, and where does it go?

Pure: it reads the parsed request and configuration and either returns what the
renderer needs or raises PermanentError naming the field and the rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.config import AccelopsConfig, SliceConfig, TeamPolicy
from shared.errors import PermanentError
from shared.jobspec.request import JobRequest
from shared.jobspec.tpu import TpuShape, lookup

__all__ = ["Admission", "check_policy"]


@dataclass(frozen=True, slots=True)
class Admission:
    """A request that passed policy, with the team and TPU shape it resolved to."""

    request: JobRequest
    team: TeamPolicy
    shape: TpuShape
    slices: SliceConfig


def check_policy(request: JobRequest, config: AccelopsConfig) -> Admission:
    """Resolve the request's team and TPU shape, or raise PermanentError saying why not."""
    team = config.teams.get(request.team)
    if team is None:
        known = ", ".join(sorted(config.teams)) or "none configured"
        raise PermanentError(f"unknown team {request.team!r} (known teams: {known})",
                             field="team", rule="must be a team in the configuration")
    shape = lookup(request.tpu.type)
    if team.tpu_types is not None and shape.type not in team.tpu_types:
        raise PermanentError(
            f"TPU type {shape.type!r} is not allowed for team {request.team!r} "
            f"(allowed: {', '.join(team.tpu_types)})",
            field="tpu.type", rule="must be in the team's tpu_types",
        )
    if team.max_slices is not None and request.tpu.slices > team.max_slices:
        raise PermanentError(
            f"{request.tpu.slices} slices requested; team {request.team!r} may use at most "
            f"{team.max_slices}",
            field="tpu.slices", rule=f"must be at most {team.max_slices}",
        )
    if team.image_prefixes is not None and not any(
        request.image.startswith(prefix) for prefix in team.image_prefixes
    ):
        raise PermanentError(
            f"image {request.image!r} is not allowed for team {request.team!r} "
            f"(allowed prefixes: {', '.join(team.image_prefixes)})",
            field="image", rule="must start with one of the team's image_prefixes",
        )
    return Admission(request=request, team=team, shape=shape, slices=config.slices)
