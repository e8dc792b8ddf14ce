"""The sandbox's own copies of the CRDs it serves, compiled once into structural schemas.

kube-apiserver builds, for each version of a CRD, a structural schema
(k8s.io/apiextensions-apiserver v0.32.0, pkg/apiserver/schema/structural.go) that the
request path walks to prune, default and validate custom resources, and compiles its
``x-kubernetes-validations`` rules once (pkg/apiserver/schema/cel/compilation.go). Here
:class:`Schema` is that tree: types, value validations (patterns compiled, formats
resolved), list and map types, defaults and compiled CEL rules, with a few flags computed
once (``has_rules``, ``has_defaults``…) so that walking a JobSet skips the subtrees with
nothing to do.

The CRDs are the YAML files in ``crds/`` beside this module, copied from upstream at the
pinned versions (``crds/SOURCES.md`` names each source and its sha256). They are parsed
on first use, or at server start (:func:`load`), and never re-read. Objects of these kinds
are validated against these copies, whatever CRD object of the same name the API holds:
a CRD applied at run time with another schema is served (discovery, storage) but not
validated by its own schema (:func:`compile_crd` would compile it; nothing does yet).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sandbox.kubeapi import cel
from sandbox.kubeapi.formats import checked_format

__all__ = [
    "CRD_DIRECTORY",
    "Crd",
    "CrdVersion",
    "Schema",
    "compile_crd",
    "crd_document",
    "crd_for_kind",
    "crd_for_resource",
    "crds",
    "load",
    "version_schema",
]

CRD_DIRECTORY = Path(__file__).with_name("crds")

_NO_DEFAULT = object()


@dataclass(eq=False)
class Schema:
    """One node of a structural schema, with its value validations."""

    type: str = ""
    format: str = ""  # as written (CEL reads durations and timestamps by it)
    check_format: str = ""  # what value validation checks ("" when the server strips it)
    nullable: bool = False
    int_or_string: bool = False
    preserve_unknown: bool = False
    embedded: bool = False
    properties: dict[str, Schema] | None = None
    additional: Schema | None = None
    additional_allowed: bool | None = None  # additionalProperties: true/false
    items: Schema | None = None
    required: tuple[str, ...] = ()
    enum: tuple[Any, ...] | None = None
    pattern: re.Pattern[str] | None = None
    pattern_text: str = ""
    pattern_error: str = ""
    max_length: int | None = None
    min_length: int | None = None
    max_items: int | None = None
    min_items: int | None = None
    max_properties: int | None = None
    min_properties: int | None = None
    maximum: float | None = None
    minimum: float | None = None
    exclusive_maximum: bool = False
    exclusive_minimum: bool = False
    multiple_of: float | None = None
    unique_items: bool = False
    list_type: str = ""
    list_map_keys: tuple[str, ...] = ()
    map_type: str = ""
    default: Any = _NO_DEFAULT
    all_of: tuple[Schema, ...] = ()
    any_of: tuple[Schema, ...] = ()
    one_of: tuple[Schema, ...] = ()
    not_: Schema | None = None
    rules: tuple[cel.Rule, ...] = ()
    # Computed once: whether anything below (this node included) needs a pass.
    has_rules: bool = False
    has_defaults: bool = False
    has_list_sets: bool = False
    cel_names: dict[str, str] = field(default_factory=dict)  # property -> escaped name

    @property
    def has_default(self) -> bool:
        return self.default is not _NO_DEFAULT

    @property
    def types(self) -> tuple[str, ...]:
        """The JSON types the value may have (int-or-string is both)."""
        if self.int_or_string:
            return ("integer", "string")
        return (self.type,) if self.type else ()

    def child(self, key: str) -> Schema | None:
        """The schema of property ``key`` (a declared property, else additionalProperties)."""
        if self.properties is not None:
            found = self.properties.get(key)
            if found is not None:
                return found
        return self.additional


@dataclass(frozen=True)
class CrdVersion:
    """One served version of a CRD."""

    name: str
    schema: Schema
    served: bool
    storage: bool
    status_subresource: bool


@dataclass(frozen=True)
class Crd:
    """A compiled CustomResourceDefinition."""

    group: str
    kind: str
    plural: str
    namespaced: bool
    versions: dict[str, CrdVersion]


# ----------------------------------------------------------------------------- compiling


def compile_crd(document: Mapping[str, Any]) -> Crd:
    """Compile an ``apiextensions.k8s.io/v1`` CustomResourceDefinition.

    Raises cel.UnsupportedRule / formats.UnsupportedFormat when it uses a rule or format
    the sandbox does not evaluate (so nothing is skipped silently)."""
    spec = document["spec"]
    names = spec["names"]
    versions: dict[str, CrdVersion] = {}
    for version in spec["versions"]:
        raw = ((version.get("schema") or {}).get("openAPIV3Schema")) or {}
        versions[version["name"]] = CrdVersion(
            name=version["name"],
            schema=_compile(raw),
            served=bool(version.get("served", True)),
            storage=bool(version.get("storage", False)),
            status_subresource="status" in (version.get("subresources") or {}),
        )
    return Crd(group=spec["group"], kind=names["kind"], plural=names["plural"],
               namespaced=spec.get("scope") == "Namespaced", versions=versions)


def _compile(raw: Mapping[str, Any]) -> Schema:
    node = Schema(
        type=str(raw.get("type") or ""),
        format=str(raw.get("format") or ""),
        check_format=checked_format(str(raw.get("format") or "")),
        nullable=bool(raw.get("nullable")),
        int_or_string=bool(raw.get("x-kubernetes-int-or-string")),
        preserve_unknown=bool(raw.get("x-kubernetes-preserve-unknown-fields")),
        embedded=bool(raw.get("x-kubernetes-embedded-resource")),
        required=tuple(raw.get("required") or ()),
        enum=tuple(raw["enum"]) if "enum" in raw else None,
        max_length=raw.get("maxLength"),
        min_length=raw.get("minLength"),
        max_items=raw.get("maxItems"),
        min_items=raw.get("minItems"),
        max_properties=raw.get("maxProperties"),
        min_properties=raw.get("minProperties"),
        maximum=_number(raw.get("maximum")),
        minimum=_number(raw.get("minimum")),
        exclusive_maximum=bool(raw.get("exclusiveMaximum")),
        exclusive_minimum=bool(raw.get("exclusiveMinimum")),
        multiple_of=_number(raw.get("multipleOf")),
        unique_items=bool(raw.get("uniqueItems")),
        list_type=str(raw.get("x-kubernetes-list-type") or ""),
        list_map_keys=tuple(raw.get("x-kubernetes-list-map-keys") or ()),
        map_type=str(raw.get("x-kubernetes-map-type") or ""),
        default=raw.get("default", _NO_DEFAULT),
        all_of=tuple(_compile(s) for s in raw.get("allOf") or ()),
        any_of=tuple(_compile(s) for s in raw.get("anyOf") or ()),
        one_of=tuple(_compile(s) for s in raw.get("oneOf") or ()),
        not_=_compile(raw["not"]) if "not" in raw else None,
        rules=tuple(cel.compile_rule(r) for r in raw.get("x-kubernetes-validations") or ()),
    )
    if "pattern" in raw:
        node.pattern_text = str(raw["pattern"])
        try:
            node.pattern = re.compile(_python_pattern(node.pattern_text), re.ASCII)
        except re.error as exc:
            node.pattern_error = str(exc)
    if "properties" in raw:
        node.properties = {k: _compile(v) for k, v in (raw["properties"] or {}).items()}
        for name in node.properties:
            escaped = cel.escape(name)
            if escaped is not None:
                node.cel_names[name] = escaped
    additional = raw.get("additionalProperties")
    if isinstance(additional, Mapping):
        node.additional = _compile(additional)
    elif isinstance(additional, bool):
        node.additional_allowed = additional
    if isinstance(raw.get("items"), Mapping):
        node.items = _compile(raw["items"])
    _summarise(node)
    return node


def _summarise(node: Schema) -> None:
    children = [*(node.properties or {}).values(), node.additional, node.items]
    below = [c for c in children if c is not None]
    node.has_rules = bool(node.rules) or any(c.has_rules for c in below)
    node.has_defaults = any(c.has_default or c.has_defaults for c in below)
    node.has_list_sets = node.list_type in ("set", "map") or any(c.has_list_sets for c in below)


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _python_pattern(pattern: str) -> str:
    """RE2 syntax as Python's re reads it (compiled with re.ASCII, as RE2's classes are):
    ``$`` and ``\\z`` end the text (Python's ``$`` also matches before a final newline),
    and an inline flag group after the start (``^(?i)[a-z]``, valid in Go, an error in
    Python) scopes the rest."""
    pattern = _end_anchors(pattern)
    match = re.search(r"\(\?([imsU]+)\)", pattern)
    if match and match.start() > 0 and pattern[:match.start()].count("(") == \
            pattern[:match.start()].count(")"):
        rest = pattern[match.end():]
        return f"{pattern[:match.start()]}(?{match[1]}:{rest})"
    return pattern


def _end_anchors(pattern: str) -> str:
    out = []
    in_class = False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            pair = pattern[index:index + 2]
            out.append(r"\Z" if pair == r"\z" and not in_class else pair)
            index += 2
            continue
        if char == "[" and not in_class:
            in_class = True
        elif char == "]" and in_class:
            in_class = False
        out.append(r"\Z" if char == "$" and not in_class else char)
        index += 1
    return "".join(out)


# ----------------------------------------------------------------------------- registry

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the JobSet CRD is 700 kB
_lock = threading.Lock()
_by_kind: dict[tuple[str, str], Crd] = {}
_by_resource: dict[tuple[str, str], Crd] = {}


@functools.cache
def _parsed(path: Path) -> dict[str, Any]:
    documents = [d for d in yaml.load_all(path.read_text(encoding="utf-8"), Loader=_Loader) if d]
    if len(documents) != 1 or documents[0].get("kind") != "CustomResourceDefinition":
        raise ValueError(f"{path} is not one CustomResourceDefinition")
    document: dict[str, Any] = documents[0]
    return document


def crd_document(path: Path) -> dict[str, Any]:
    """One CRD file as parsed YAML, parsed once per process and shared: callers must not
    change it (:func:`sandbox.kubeapi.crdfiles.load_crd` hands out copies)."""
    return _parsed(path.resolve())


def load() -> None:
    """Parse and compile every CRD in ``crds/`` (once; ~1 s): a server calls this before
    it accepts requests, so no request pays for it."""
    if _by_kind:
        return
    with _lock:
        if _by_kind:
            return
        for path in sorted(CRD_DIRECTORY.glob("*.yaml")):
            crd = compile_crd(crd_document(path))
            _by_kind[(crd.group, crd.kind)] = crd
            _by_resource[(crd.group, crd.plural)] = crd


def crds() -> list[Crd]:
    """Every CRD the sandbox serves."""
    load()
    return list(_by_kind.values())


def crd_for_kind(group: str, kind: str) -> Crd | None:
    load()
    return _by_kind.get((group, kind))


def crd_for_resource(group: str, resource: str) -> Crd | None:
    load()
    return _by_resource.get((group, resource))


def version_schema(group: str, version: str, kind: str) -> CrdVersion | None:
    """The compiled schema of ``group/version`` ``kind``, None when the sandbox has none."""
    crd = crd_for_kind(group, kind)
    return crd.versions.get(version) if crd is not None else None
