"""CEL validation rules (``x-kubernetes-validations``) evaluated as kube-apiserver does.

The evaluator is a real one: ``common-expression-language`` (PyPI; Python bindings of the
Rust ``cel`` crate), which parses and runs the CEL language with its macros (``has``,
``all``, ``exists``, ``exists_one``…), ``size``, ``matches``, durations and timestamps.
What it lacks from the environment Kubernetes compiles rules in
(k8s.io/apiserver v0.32.0 pkg/cel/library, cel-go v0.22 ext.Strings) is added here:

* ``isURL(string)`` — true when Go's ``url.ParseRequestURI`` accepts the string
  (pkg/cel/library/urls.go);
* ``<string>.format(<list>)`` — cel-go's ext/formatting.go for ``%s``, ``%d`` and ``%%``
  (durations print as ``"6347s"``, timestamps in RFC 3339);
* ``<string>.split(<string>[, <int>])`` — cel-go's ext/strings.go, Go's ``strings.SplitN``
  (a negative or absent limit splits at every separator, 0 gives an empty list, an empty
  separator splits into characters); the Gateway API's rules on label keys use it.

Values reach a rule as k8s.io/apiserver pkg/cel/common/values.go gives them: properties
of an object with a schema are escaped (``namespace`` -> ``__namespace__``, ``-`` ->
``__dash__``…, pkg/cel/escaping.go), ``format: duration`` strings are durations,
``date``/``date-time`` timestamps, ``number`` doubles; ``int-or-string`` stays as given.

Evaluation follows k8s.io/apiextensions-apiserver v0.32.0
pkg/apiserver/schema/cel/validation.go: a rule runs on each non-null value of its node;
a rule that uses ``oldSelf`` (a transition rule) only when the old value can be
correlated (objects by key, ``list-type: map`` items by their keys); a false result is
the rule's ``message`` (``messageExpression`` evaluated, ``failed rule: <rule>`` when
neither is given) with its ``reason`` (FieldValueInvalid by default) at the node's path
(or ``fieldPath``); a runtime error is ``<error> evaluating rule: <rule>`` (``no such
key: x``). Every rule is compiled when its CRD is loaded; a rule that calls a function
this environment does not provide fails the load (:class:`UnsupportedRule`), so no rule
is ever skipped silently.

Not simulated: the cost budget (rules here are small); equality of ``list-type: set``
and ``map`` lists ignores order in Kubernetes but not here — no pinned CRD compares such
lists (a unit test holds that).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import cel as celrs

from sandbox.kubeapi import field_errors as fe
from sandbox.kubeapi.field_errors import FieldError
from sandbox.kubeapi.formats import parse_date_time, parse_duration, parse_request_uri

__all__ = ["Rule", "UnsupportedRule", "compile_rule", "escape", "evaluate_rules"]

# Functions and operators of the CEL core the Rust crate evaluates itself.
_CORE = frozenset({
    "!_", "-_", "@in", "@not_strictly_false", "_!=_", "_%_", "_&&_", "_*_", "_+_", "_-_",
    "_/_", "_<=_", "_<_", "_==_", "_>=_", "_>_", "_?_:_", "_[_]", "_||_", "all", "bool",
    "bytes", "contains", "double", "duration", "endsWith", "exists", "exists_one",
    "filter", "has", "int", "map", "matches", "size", "startsWith", "string", "timestamp",
    "uint", "getSeconds", "getMinutes", "getHours", "getMilliseconds",
})


class UnsupportedRule(ValueError):
    """A rule this environment cannot evaluate (it names a missing function)."""


@dataclass(frozen=True)
class Rule:
    """One compiled ``x-kubernetes-validations`` entry."""

    source: str
    program: celrs.Program
    message: str
    message_program: celrs.Program | None
    message_source: str
    reason: str
    field_path: str
    uses_old_self: bool
    optional_old_self: bool


def compile_rule(raw: Mapping[str, Any]) -> Rule:
    """Compile a rule of a CRD; UnsupportedRule when it needs a function not provided."""
    source = str(raw.get("rule") or "")
    program = _compile(source)
    message_source = str(raw.get("messageExpression") or "")
    message_program = _compile(message_source) if message_source else None
    return Rule(
        source=source,
        program=program,
        message=str(raw.get("message") or ""),
        message_program=message_program,
        message_source=message_source,
        reason=str(raw.get("reason") or "FieldValueInvalid"),
        field_path=_normalized_field_path(str(raw.get("fieldPath") or "")),
        uses_old_self="oldSelf" in program.variables(),
        optional_old_self=bool(raw.get("optionalOldSelf")),
    )


def _compile(source: str) -> celrs.Program:
    try:
        program = celrs.compile(source)
    except Exception as exc:  # the binding raises plain ValueError/RuntimeError
        raise UnsupportedRule(f"cannot compile {source!r}: {exc}") from exc
    missing = set(program.functions()) - _CORE - set(_LIBRARY)
    if missing:
        raise UnsupportedRule(f"{source!r} calls {', '.join(sorted(missing))}, "
                              "which the sandbox's CEL environment does not provide")
    return program


def _normalized_field_path(path: str) -> str:
    # ".spec.foo" and "['foo']" forms; only dotted names occur in practice.
    return ".".join(re.findall(r"[^.\[\]']+", path))


# ----------------------------------------------------------------------------- evaluation


def evaluate_rules(
    rules: Sequence[Rule],
    path: str,
    schema_type: str,
    self_value: Any,
    old_value: Any,
    has_old: bool,
) -> list[FieldError]:
    """Run a node's rules on its (converted) value; the field errors of those not met.

    ``self_value``/``old_value`` are already in CEL form (:func:`to_cel`); ``has_old``
    says whether the old value could be correlated (transition rules run only then)."""
    errors: list[FieldError] = []
    context: celrs.Context | None = None
    for rule in rules:
        if rule.uses_old_self and not has_old and not rule.optional_old_self:
            continue
        if context is None:
            context = _context(self_value, old_value, has_old)
        try:
            result = rule.program.execute(context)
        except Exception as exc:
            errors.append(fe.invalid(path, schema_type,
                                     f"{_error_text(exc)} evaluating rule: {_rule_text(rule)}"))
            continue
        if result is True:
            continue
        where = f"{path}.{rule.field_path}" if rule.field_path else path
        errors.append(_failure(rule, where, schema_type, context))
    return errors


def _context(self_value: Any, old_value: Any, has_old: bool) -> celrs.Context:
    context = celrs.Context(functions=dict(_LIBRARY))
    context.add_variable("self", self_value)
    if has_old:
        context.add_variable("oldSelf", old_value)
    return context


def _failure(rule: Rule, path: str, schema_type: str, context: celrs.Context) -> FieldError:
    message = rule.message.strip() or f"failed rule: {_rule_text(rule)}"
    if rule.message_program is not None:
        try:
            evaluated = rule.message_program.execute(context)
        except Exception:  # noqa: S110 - the real server logs it and falls back the same way
            pass
        else:
            if isinstance(evaluated, str) and evaluated.strip() and "\n" not in evaluated:
                message = evaluated.strip()
    if rule.reason == "FieldValueForbidden":
        return fe.forbidden(path, message)
    if rule.reason == "FieldValueRequired":
        return fe.required(path, message)
    if rule.reason == "FieldValueDuplicate":
        return fe.duplicate(path, schema_type)
    return fe.invalid(path, schema_type, message)


def _rule_text(rule: Rule) -> str:
    return rule.message.strip() or rule.source.strip()


def _error_text(exc: Exception) -> str:
    """cel-go's wording for the runtime errors rules can meet."""
    if isinstance(exc, KeyError):
        return f"no such key: {exc.args[0] if exc.args else ''}"
    if isinstance(exc, ZeroDivisionError):
        return "division by zero"
    return str(exc)


# ----------------------------------------------------------------------------- values

_RESERVED = frozenset({
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
    "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
    "void", "while",
})
_PLAIN = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_ESCAPABLE = re.compile(r"^[a-zA-Z_.\-/][a-zA-Z0-9_.\-/]*$")
_ESCAPES = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}


def escape(name: str) -> str | None:
    """A property name as CEL sees it (pkg/cel/escaping.go), None when it cannot be."""
    if name in _RESERVED:
        return f"__{name}__"
    if _PLAIN.match(name) and "__" not in name:
        return name
    if not _ESCAPABLE.match(name):
        return None
    return re.sub(r"__|[./-]", lambda m: _ESCAPES[m.group(0)], name)


def duration_value(text: str) -> timedelta | None:
    """A ``format: duration`` string as a duration (strfmt.ParseDuration), None if not one."""
    nanos = parse_duration(text)
    return None if nanos is None else timedelta(microseconds=nanos / 1000)


def timestamp_value(text: str) -> datetime | None:
    return parse_date_time(text)


# ----------------------------------------------------------------------------- library


def _is_url(value: Any) -> bool:
    if not isinstance(value, str):
        raise TypeError("no such overload")
    return parse_request_uri(value)


def _format(template: Any, args: Any) -> str:
    if not isinstance(template, str) or not isinstance(args, list):
        raise TypeError("no such overload")
    out: list[str] = []
    position = 0
    index = 0
    while index < len(template):
        char = template[index]
        if char != "%":
            out.append(char)
            index += 1
            continue
        verb = template[index + 1:index + 2]
        index += 2
        if verb == "%":
            out.append("%")
            continue
        if position >= len(args):
            raise ValueError(f"index {position} out of range")
        arg = args[position]
        position += 1
        if verb == "s":
            out.append(_format_string(arg))
        elif verb == "d" and isinstance(arg, int) and not isinstance(arg, bool):
            out.append(str(arg))
        else:
            raise ValueError(f"could not format {arg!r} with %{verb}")
    return "".join(out)


def _format_string(arg: Any) -> str:
    if isinstance(arg, bool):
        return "true" if arg else "false"
    if isinstance(arg, timedelta):
        seconds = arg.total_seconds()
        return (f"{seconds:f}".rstrip("0").rstrip(".") if seconds % 1 else
                str(int(seconds))) + "s"
    if isinstance(arg, datetime):
        return arg.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if arg is None:
        return "null"
    if isinstance(arg, list):
        return "[" + ", ".join(_format_string(a) for a in arg) + "]"
    return str(arg)


def _split(target: Any, separator: Any, limit: Any = -1) -> list[str]:
    if not isinstance(target, str) or not isinstance(separator, str) \
            or not isinstance(limit, int) or isinstance(limit, bool):
        raise TypeError("no such overload")
    if limit == 0:
        return []
    if separator == "":
        # Go splits into UTF-8 sequences; with a limit the last one keeps the rest.
        chars = list(target)
        if 0 < limit < len(chars):
            return [*chars[:limit - 1], "".join(chars[limit - 1:])]
        return chars
    return target.split(separator, limit - 1 if limit > 0 else -1)


_LIBRARY: dict[str, Callable[..., Any]] = {"isURL": _is_url, "format": _format,
                                           "split": _split}
