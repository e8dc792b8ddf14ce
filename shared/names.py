"""Deterministic, RFC 1123-safe names derived from user input.

Names of created objects carry idempotency: the same (name, request id) always
yields the same object name, so a redelivered request finds the object it created
the first time. User text is sanitised (lowercased, anything outside ``[a-z0-9-]``
replaced) and truncated; a short hash of the raw inputs keeps two requests whose
sanitised names collide apart.

Why 40 characters for a JobSet: JobSet names its Jobs ``<jobset>-<replicated job>-
<index>`` and Pods ``<job>-<completion index>-<5 random>``; the Job name becomes a
label value (≤ 63), so the JobSet name must leave room for both suffixes.
"""

from __future__ import annotations

import hashlib
import re

__all__ = [
    "JOBSET_NAME_MAX",
    "POOL_NAME_MAX",
    "dns_label",
    "jobset_name",
    "pool_name",
    "request_key",
    "short_hash",
]

JOBSET_NAME_MAX = 40
_HASH_LEN = 8
_INVALID = re.compile(r"[^a-z0-9-]+")
_DASHES = re.compile(r"-{2,}")


def short_hash(*parts: str, length: int = _HASH_LEN) -> str:
    """A lowercase hex digest of the parts, unambiguous about where each part ends."""
    digest = hashlib.sha256()
    for part in parts:
        encoded = part.encode("utf-8")
        digest.update(len(encoded).to_bytes(4, "big"))
        digest.update(encoded)
    return digest.hexdigest()[:length]


def dns_label(text: str, max_length: int = 63) -> str:
    """Sanitise text into an RFC 1123 label of at most max_length characters.

    Returns an empty string when nothing usable is left; callers add a hash suffix,
    so an empty stem still yields a valid name.
    """
    label = _DASHES.sub("-", _INVALID.sub("-", text.lower()))
    return label[:max_length].strip("-")


def jobset_name(name: str, request_id: str) -> str:
    """``<sanitised name>-<hash of name and request id>``, at most 40 characters."""
    suffix = short_hash(name, request_id)
    stem = dns_label(name, JOBSET_NAME_MAX - _HASH_LEN - 1)
    if not stem or not stem[0].isalpha():
        # Job and Pod names start with a letter in most tooling (and DNS-1035 for
        # Services JobSet creates); prefix rather than drop the user's text.
        stem = dns_label(f"j-{stem}", JOBSET_NAME_MAX - _HASH_LEN - 1)
    return f"{stem}-{suffix}"


POOL_NAME_MAX = 40


def pool_name(namespace: str, jobset: str, slice_index: int) -> str:
    """The node pool of one slice of a JobSet: ``<jobset>-<hash>-s<slice>``, ≤ 40 characters.

    Depends only on the JobSet's namespace, name and slice index, so it is the same
    across JobSet restarts and across reconcile runs (GKE pool names are RFC 1035:
    they start with a letter).
    """
    suffix = f"-{short_hash(namespace, jobset, length=6)}-s{slice_index}"
    stem = dns_label(jobset, POOL_NAME_MAX - len(suffix))
    if not stem or not stem[0].isalpha():
        stem = dns_label(f"p-{stem}", POOL_NAME_MAX - len(suffix))
    return f"{stem}{suffix}"


def request_key(request_id: str) -> str:
    """A label value standing for a request id (which may be 128 characters of
    ``[A-Za-z0-9._:/-]``; a label value is at most 63 characters, without ``/`` or ``:``),
    so every JobSet made for one request id can be listed with one selector, whatever
    its name or namespace."""
    return short_hash(request_id, length=20)
