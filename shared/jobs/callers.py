"""Who may act for which team through the jobs API. Pure.

An identity (the verified e-mail of an ID token) acts for the teams whose
``members`` list it and, when it is one of ``jobs_api.admins``, for every team.
E-mail addresses are compared without regard to case, as Google treats them.
Anyone else may call nothing but the health check and the API description.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.config import AccelopsConfig

__all__ = ["Caller", "caller"]


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated identity and the teams it may act for."""

    email: str
    teams: frozenset[str]
    admin: bool

    def may_act_for(self, team: str) -> bool:
        """Whether the caller may submit, read and cancel ``team``'s jobs. An admin
        may name any team (the policy check then refuses an unknown one)."""
        return self.admin or team in self.teams

    @property
    def restricted_to(self) -> frozenset[str] | None:
        """The teams the caller is limited to; None for an admin (every team)."""
        return None if self.admin else self.teams


def caller(email: str, config: AccelopsConfig) -> Caller:
    """The caller ``email`` is, by the configuration."""
    email = email.strip().lower()
    admin = email in {a.strip().lower() for a in config.jobs_api.admins}
    if admin:
        return Caller(email, frozenset(config.teams), admin=True)
    teams = frozenset(name for name, team in config.teams.items()
                      if email in {m.strip().lower() for m in team.members})
    return Caller(email, teams, admin=False)
