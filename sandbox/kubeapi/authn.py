"""Who is calling: kube-apiserver's static token file and its impersonation headers.

A token file is the CSV ``--token-auth-file`` reads, one identity a line:
``token,user,uid,"group1,group2"`` (the groups column is optional). A bearer
token found there authenticates as that user with those groups plus
``system:authenticated``; an unknown token is refused (401); a request without
one is ``system:anonymous`` in ``system:unauthenticated``, as with anonymous
authentication enabled.

``Impersonate-User`` / ``Impersonate-Group`` / ``Impersonate-Uid`` replace the
caller's identity once the caller may ``impersonate`` them (checked by the
caller of :func:`impersonation_requests`), which is how ``kubectl --as`` works.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sandbox.kubeapi.attributes import RequestAttributes
from sandbox.kubeapi.errors import ApiError

AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
MASTERS = "system:masters"
ANONYMOUS_USER = "system:anonymous"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
SANDBOX_ADMIN = "sandbox-admin"


@dataclass(frozen=True)
class UserInfo:
    """An authenticated identity, as the authorizer sees it."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()


ANONYMOUS = UserInfo(ANONYMOUS_USER, groups=(UNAUTHENTICATED,))


@dataclass(frozen=True)
class TokenEntry:
    """One line of a token file."""

    token: str
    user: str
    uid: str = ""
    groups: tuple[str, ...] = ()

    def csv_line(self) -> str:
        out = io.StringIO()
        csv.writer(out, lineterminator="").writerow(
            [self.token, self.user, self.uid or self.user, ",".join(self.groups)]
        )
        return out.getvalue()


def admin_entry(token: str) -> TokenEntry:
    """The sandbox administrator: in ``system:masters``, so allowed everything."""
    return TokenEntry(token, SANDBOX_ADMIN, SANDBOX_ADMIN, (MASTERS,))


def service_account_user(namespace: str, name: str) -> str:
    """``system:serviceaccount:NS:NAME``, the user name of a service account."""
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def service_account_groups(namespace: str) -> tuple[str, str]:
    """The groups every service account token carries."""
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")


def split_service_account(user: str) -> tuple[str, str] | None:
    """(namespace, name) when ``user`` names a service account, else None."""
    if not user.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    namespace, _, name = user[len(SERVICE_ACCOUNT_PREFIX) :].partition(":")
    return (namespace, name) if namespace and name and ":" not in name else None


def write_token_file(path: str | os.PathLike[str], entries: Iterable[TokenEntry]) -> Path:
    """Write a token file (mode 0600) that :func:`read_token_file` and kube-apiserver read."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(entry.csv_line() + "\n" for entry in entries), encoding="utf-8")
    target.chmod(0o600)
    return target


def read_token_file(path: str | os.PathLike[str]) -> dict[str, UserInfo]:
    """Token -> identity; ValueError naming the line for a malformed or duplicate entry."""
    tokens: dict[str, UserInfo] = {}
    text = Path(path).read_text(encoding="utf-8")
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or not "".join(row).strip():
            continue
        if len(row) < 3:
            raise ValueError(f"{path}:{number}: need at least token,user,uid")
        token, user, uid = (cell.strip() for cell in row[:3])
        if not token or not user:
            raise ValueError(f"{path}:{number}: token and user must not be empty")
        if token in tokens:
            raise ValueError(f"{path}:{number}: duplicate token")
        groups = tuple(g.strip() for g in row[3].split(",") if g.strip()) if len(row) > 3 else ()
        tokens[token] = UserInfo(user, uid, groups)
    return tokens


class Authenticator:
    """Bearer tokens to identities; ``tokens=None`` means authentication is off."""

    def __init__(self, tokens: Mapping[str, UserInfo] | None) -> None:
        self.tokens = tokens

    @property
    def enabled(self) -> bool:
        return self.tokens is not None

    def authenticate(self, authorization: str | None) -> UserInfo:
        """The caller's identity; 401 ApiError for a token the file does not list."""
        if self.tokens is None:
            return ANONYMOUS
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return ANONYMOUS
        user = self.tokens.get(token.strip())
        if user is None:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        return with_group(user, AUTHENTICATED)


def with_group(user: UserInfo, group: str) -> UserInfo:
    """``user`` with ``group`` added unless it is already there."""
    if group in user.groups:
        return user
    return UserInfo(user.name, user.uid, (*user.groups, group))


def impersonation_requests(
    user: str | None, groups: Sequence[str], uid: str | None
) -> list[RequestAttributes]:
    """What the caller must be allowed to ``impersonate`` for these headers; 400 when
    groups or a uid come without a user, as the real API answers."""
    if user is None:
        if groups or uid:
            raise ApiError.bad_request(
                "requested impersonation of groups or uid without impersonating a user"
            )
        return []
    checks: list[RequestAttributes] = []
    account = split_service_account(user)
    if account is not None:
        checks.append(_impersonate("", "serviceaccounts", account[1], account[0]))
    else:
        checks.append(_impersonate("", "users", user))
    checks += [_impersonate("", "groups", group) for group in groups]
    if uid:
        checks.append(_impersonate("authentication.k8s.io", "uids", uid))
    return checks


def _impersonate(group: str, resource: str, name: str, namespace: str = "") -> RequestAttributes:
    return RequestAttributes(
        verb="impersonate",
        api_group=group,
        api_version="v1",
        resource=resource,
        namespace=namespace,
        name=name,
        path="",
        is_resource_request=True,
    )


def impersonated_user(user: str, groups: Sequence[str], uid: str | None) -> UserInfo:
    """The identity a request runs as after impersonation (groups completed like the real
    filter: service-account groups, then system:authenticated or system:unauthenticated)."""
    all_groups = list(groups)
    account = split_service_account(user)
    if account is not None:
        all_groups += [g for g in service_account_groups(account[0]) if g not in all_groups]
    if user == ANONYMOUS_USER:
        if UNAUTHENTICATED not in all_groups:
            all_groups.append(UNAUTHENTICATED)
    elif AUTHENTICATED not in all_groups and UNAUTHENTICATED not in all_groups:
        all_groups.append(AUTHENTICATED)
    return UserInfo(user, uid or "", tuple(all_groups))
