"""PATCH bodies: JSON merge patch, JSON patch, strategic merge, server-side apply.

The code under test patches JobSets, Kueue workloads and nodes with whichever
flavour the official client sends (``_content_type``), so each one must at
least change the object the way the real API would for the common cases.

Simplifications, on purpose:

* **strategic merge** (``application/strategic-merge-patch+json``) is applied
  as a JSON merge patch: lists are replaced wholesale instead of merged by
  their patch-merge key (e.g. containers by ``name``), and ``$patch`` /
  ``$setElementOrder`` / ``$retainKeys`` directives are dropped, not obeyed.
* **server-side apply** (``application/apply-patch+yaml``) merges the applied
  configuration into the live object like a merge patch: there is no
  ``managedFields`` ownership tracking, so no conflicts are ever reported,
  fields a manager stops applying are NOT removed, lists are replaced
  wholesale, and ``force`` is accepted and ignored. ``fieldManager`` is still
  required, as in the real API.

All functions are pure: they never modify their inputs.
"""

from __future__ import annotations

import copy
import enum
import json
from typing import Any

import yaml

from sandbox.kubeapi.errors import ApiError


class PatchType(enum.Enum):
    """The PATCH flavours the sandbox understands, by Content-Type."""

    JSON = "application/json-patch+json"
    MERGE = "application/merge-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"


def patch_type_for(content_type: str | None) -> PatchType:
    """Map a Content-Type header to a patch flavour; 415 for anything else."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    for patch_type in PatchType:
        if patch_type.value == media:
            return patch_type
    raise ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(t.value for t in PatchType)}",
    )


def decode_patch_body(patch_type: PatchType, raw: bytes) -> Any:
    """Decode the request body for ``patch_type`` (YAML or JSON for apply); 400 if broken."""
    text = raw.decode("utf-8", errors="replace")
    try:
        if patch_type is PatchType.APPLY:
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                return yaml.safe_load(text)
        return json.loads(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ApiError.bad_request(f"error decoding patch: {exc}") from exc


# --------------------------------------------------------------------------
# RFC 7386 JSON merge patch


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result: dict[str, Any] = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --------------------------------------------------------------------------
# strategic merge (simplified)


def _strip_directives(patch: Any) -> Any:
    if isinstance(patch, dict):
        return {k: _strip_directives(v) for k, v in patch.items() if not k.startswith("$")}
    if isinstance(patch, list):
        return [_strip_directives(item) for item in patch]
    return patch


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge, simplified to a merge patch without ``$`` directives."""
    if not isinstance(patch, dict):
        raise ApiError.bad_request("strategic merge patch body must be a JSON object")
    return merge_patch(target, _strip_directives(patch))


# --------------------------------------------------------------------------
# server-side apply (simplified)


def apply_patch(target: dict[str, Any] | None, applied: Any) -> dict[str, Any]:
    """Merge an applied configuration into the live object (or build it when absent)."""
    if not isinstance(applied, dict):
        raise ApiError.bad_request("apply patch body must be an object")
    for field in ("apiVersion", "kind"):
        if not applied.get(field):
            raise ApiError.bad_request(f"invalid object type: {field} must be set in apply body")
    merged = merge_patch(target or {}, applied)
    assert isinstance(merged, dict)
    return merged


# --------------------------------------------------------------------------
# RFC 6902 JSON patch


def _unprocessable(message: str) -> ApiError:
    return ApiError.unprocessable(message)


def _parse_pointer(pointer: Any) -> list[str]:
    if not isinstance(pointer, str):
        raise ApiError.bad_request(f"JSON patch path must be a string, got {pointer!r}")
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ApiError.bad_request(f"JSON pointer {pointer!r} must start with '/'")
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/")]


def _index(container: list[Any], token: str, pointer: str, *, for_add: bool) -> int:
    if for_add and token == "-":  # noqa: S105 - a JSON pointer token, not a password
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise _unprocessable(f"invalid array index {token!r} in path {pointer!r}")
    index = int(token)
    limit = len(container) if for_add else len(container) - 1
    if index > limit:
        raise _unprocessable(f"array index {index} out of bounds in path {pointer!r}")
    return index


def _parent(doc: Any, tokens: list[str], pointer: str) -> Any:
    current = doc
    for token in tokens[:-1]:
        if isinstance(current, dict):
            if token not in current:
                raise _unprocessable(f"doc is missing path: {pointer!r}")
            current = current[token]
        elif isinstance(current, list):
            current = current[_index(current, token, pointer, for_add=False)]
        else:
            raise _unprocessable(f"doc is missing path: {pointer!r}")
    return current


def _get(doc: Any, pointer: str) -> Any:
    tokens = _parse_pointer(pointer)
    if not tokens:
        return doc
    parent = _parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _unprocessable(f"doc is missing path: {pointer!r}")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, pointer, for_add=False)]
    raise _unprocessable(f"doc is missing path: {pointer!r}")


def _add(doc: Any, pointer: str, value: Any) -> Any:
    tokens = _parse_pointer(pointer)
    if not tokens:
        return value
    parent = _parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, pointer, for_add=True), value)
    else:
        raise _unprocessable(f"doc is missing path: {pointer!r}")
    return doc


def _remove(doc: Any, pointer: str) -> Any:
    tokens = _parse_pointer(pointer)
    if not tokens:
        raise _unprocessable("cannot remove the whole document")
    parent = _parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _unprocessable(
                f"remove operation does not apply: doc is missing path: {pointer!r}"
            )
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, pointer, for_add=False)]
    else:
        raise _unprocessable(f"remove operation does not apply: doc is missing path: {pointer!r}")
    return doc


def json_equal(left: Any, right: Any) -> bool:
    """JSON value equality: unlike ``==``, ``true`` is not ``1``."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left is right
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(json_equal, left, right))
    return type(left) is type(right) and bool(left == right)


def _required(operation: dict[str, Any], field: str) -> Any:
    if field not in operation:
        raise ApiError.bad_request(
            f"JSON patch operation {operation.get('op')!r} is missing {field!r}"
        )
    return operation[field]


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902, atomically: malformed ops -> 400, ops that cannot apply or fail ``test`` -> 422."""
    if not isinstance(operations, list):
        raise ApiError.bad_request("JSON patch body must be a list of operations")
    doc = copy.deepcopy(target)
    for operation in operations:
        if not isinstance(operation, dict):
            raise ApiError.bad_request(f"JSON patch operation must be an object: {operation!r}")
        op = operation.get("op")
        path = _required(operation, "path")
        if op == "add":
            doc = _add(doc, path, copy.deepcopy(_required(operation, "value")))
        elif op == "remove":
            doc = _remove(doc, path)
        elif op == "replace":
            value = copy.deepcopy(_required(operation, "value"))
            _get(doc, path)
            doc = value if path == "" else _add(_remove(doc, path), path, value)
        elif op == "move":
            source = _required(operation, "from")
            if path != source and path.startswith(source + "/"):
                raise _unprocessable(f"cannot move {source!r} into its own child {path!r}")
            value = _get(doc, source)
            doc = _add(_remove(doc, source), path, value)
        elif op == "copy":
            value = copy.deepcopy(_get(doc, _required(operation, "from")))
            doc = _add(doc, path, value)
        elif op == "test":
            expected = _required(operation, "value")
            if not json_equal(_get(doc, path), expected):
                raise _unprocessable(f"testing value {path!r} failed: test failed")
        else:
            raise ApiError.bad_request(f"unexpected JSON patch operation {op!r}")
    return doc


def apply_patch_body(patch_type: PatchType, target: dict[str, Any] | None, body: Any) -> Any:
    """Apply a decoded body of ``patch_type`` to ``target`` (None only for apply)."""
    if patch_type is PatchType.APPLY:
        return apply_patch(target, body)
    if patch_type is PatchType.JSON:
        return json_patch(target, body)
    if patch_type is PatchType.STRATEGIC:
        return strategic_merge_patch(target, body)
    return merge_patch(target, body)
