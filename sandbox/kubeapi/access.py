"""The gate every request passes: authenticate, impersonate, authorize, record.

With a token file the sandbox behaves like kube-apiserver started with
``--token-auth-file`` and ``--authorization-mode=RBAC``; without one, like
``--authorization-mode=AlwaysAllow`` with no authenticator: everybody is
``system:anonymous`` and everything is allowed (what the sandbox always did).

The access log has one JSON line per request with the identity and the very
attributes the authorizer decided on, so a test can run a function under its
own identity and compare what it did with what its Role grants.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sandbox.kubeapi import rbac
from sandbox.kubeapi.attributes import RequestAttributes
from sandbox.kubeapi.authn import (
    MASTERS,
    Authenticator,
    UserInfo,
    impersonated_user,
    impersonation_requests,
)
from sandbox.kubeapi.errors import ApiError
from sandbox.kubeapi.rbac import RBAC_GROUP, Decision
from sandbox.kubeapi.store import ObjectStore


def forbidden(user: UserInfo, attributes: RequestAttributes, reason: str = "") -> ApiError:
    """The 403 kube-apiserver sends, worded as it words it."""
    if not attributes.is_resource_request:
        why = f'User "{user.name}" cannot {attributes.verb} path "{attributes.path}"'
    else:
        resource = attributes.resource
        if attributes.subresource:
            resource += "/" + attributes.subresource
        where = (
            f'in the namespace "{attributes.namespace}"'
            if attributes.namespace
            else "at the cluster scope"
        )
        why = (
            f'User "{user.name}" cannot {attributes.verb} resource "{resource}" in API group '
            f'"{attributes.api_group}" {where}'
        )
    if reason:
        why += f": {reason}"
    group, resource = attributes.api_group, attributes.resource
    if not resource:
        message = f"forbidden: {why}"
    else:
        qualified = f"{resource}.{group}" if group else resource
        message = (
            f'{qualified} "{attributes.name}" is forbidden: {why}'
            if attributes.name
            else f"{qualified} is forbidden: {why}"
        )
    details: dict[str, Any] = {"kind": resource}
    if attributes.name:
        details["name"] = attributes.name
    if group:
        details["group"] = group
    return ApiError(403, "Forbidden", message, details=details if resource else None)


class ImpersonationDenied(ApiError):
    """A 403 for an ``impersonate`` check; ``attributes`` are those of the refused check."""

    def __init__(self, caller: UserInfo, attributes: RequestAttributes, reason: str) -> None:
        error = forbidden(caller, attributes, reason)
        super().__init__(error.code, error.reason, error.message, details=error.details)
        self.attributes = attributes


class AccessLog:
    """Appends one JSON object per line; safe across the server's threads."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def record(
        self,
        user: UserInfo | None,
        attributes: RequestAttributes,
        *,
        allowed: bool,
        code: int,
        impersonator: str = "",
    ) -> None:
        entry: dict[str, Any] = {
            "user": user.name if user else "",
            "groups": list(user.groups) if user else [],
            **attributes.as_log_fields(),
            "allowed": allowed,
            "code": code,
        }
        if impersonator:
            entry["impersonatedBy"] = impersonator
        line = json.dumps(entry, sort_keys=True) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.write(line)


class AccessControl:
    """Authentication, impersonation and RBAC over the objects in ``store``."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        tokens: Mapping[str, UserInfo] | None = None,
        access_log: AccessLog | None = None,
    ) -> None:
        self.store = store
        self.authenticator = Authenticator(tokens)
        self.access_log = access_log

    @property
    def enforcing(self) -> bool:
        """Whether RBAC is enforced (a token file was given)."""
        return self.authenticator.enabled

    def authorize(self, user: UserInfo, attributes: RequestAttributes) -> Decision:
        """The authorizer's decision; always allowed when not enforcing (AlwaysAllow)."""
        if not self.enforcing:
            return Decision(True)
        return rbac.authorize(self._policy(), user, attributes)

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[rbac.PolicyRule, ...]:
        """The rules granted to ``user`` in ``namespace``; everything when not enforcing."""
        if not self.enforcing:
            return rbac.rules_for(self._policy(), UserInfo("", groups=(MASTERS,)), namespace)
        return rbac.rules_for(self._policy(), user, namespace)

    def authenticate(self, authorization: str | None) -> UserInfo:
        """The caller; ApiError 401 for a token the token file does not list."""
        return self.authenticator.authenticate(authorization)

    def impersonate(
        self,
        caller: UserInfo,
        user: str | None,
        groups: Sequence[str],
        uid: str | None,
    ) -> UserInfo:
        """The identity the request runs as: ``caller``, or whom it may impersonate.

        Raises :class:`ImpersonationDenied` (403) naming the refused check."""
        checks = impersonation_requests(user, groups, uid)
        if user is None:
            return caller
        for attributes in checks:
            decision = self.authorize(caller, attributes)
            if not decision.allowed:
                raise ImpersonationDenied(caller, attributes, decision.reason)
        return impersonated_user(user, groups, uid)

    def _policy(self) -> rbac.Policy:
        return rbac.policy_of(
            self.store.list(RBAC_GROUP, "clusterroles"),
            self.store.list(RBAC_GROUP, "roles"),
            self.store.list(RBAC_GROUP, "clusterrolebindings"),
            self.store.list(RBAC_GROUP, "rolebindings"),
        )
