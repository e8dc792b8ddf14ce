"""Custom resources are pruned, defaulted and validated as kube-apiserver does it.

Expected messages are the real server's: most are the cases of k8s.io/apiextensions-apiserver
v0.32.0 pkg/apiserver/validation/validation_test.go, the rest follow kube-openapi's and
apimachinery's wording (see the modules' docstrings)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sandbox.kubeapi import cel
from sandbox.kubeapi.crd_decode import decode
from sandbox.kubeapi.crd_lists import validate_embedded, validate_list_types
from sandbox.kubeapi.crd_openapi import validate_value
from sandbox.kubeapi.crd_rules import validate_rules
from sandbox.kubeapi.crd_schema import Schema, compile_crd
from sandbox.kubeapi.field_errors import FieldError, invalid_error, required


def schema_of(properties: dict[str, Any], **root: Any) -> Schema:
    """The compiled schema of a CRD whose ``spec`` has ``properties``."""
    document = {"spec": {"group": "example.com", "scope": "Namespaced",
                         "names": {"kind": "Widget", "plural": "widgets"},
                         "versions": [{"name": "v1", "served": True, "storage": True,
                                       "schema": {"openAPIV3Schema": {
                                           "type": "object", **root,
                                           "properties": {
                                               "apiVersion": {"type": "string"},
                                               "kind": {"type": "string"},
                                               "metadata": {"type": "object"},
                                               "spec": {"type": "object",
                                                        "properties": properties}}}}}]}}
    return compile_crd(document).versions["v1"].schema


def errors(schema: Schema, spec: Any) -> list[str]:
    return [str(e) for e in validate_value(schema, {"spec": spec})]


def rule_errors(schema: Schema, spec: Any, old_spec: Any = None, **kw: Any) -> list[str]:
    old = {"spec": old_spec} if old_spec is not None else None
    found = validate_rules(schema, {"spec": spec}, *([old] if old is not None else []), **kw)
    return [str(e) for e in found]


# --- OpenAPI value validation ----------------------------------------------------------


@pytest.mark.parametrize(("value", "message"), [
    (None, 'spec.field: Invalid value: "null": spec.field in body must be of type '
           'integer,string: "null"'),
    (True, 'spec.field: Invalid value: "boolean": spec.field in body must be of type '
           'integer,string: "boolean"'),
    (1.2, 'spec.field: Invalid value: "number": spec.field in body must be of type '
          'integer,string: "number"'),
    ({}, 'spec.field: Invalid value: "object": spec.field in body must be of type '
         'integer,string: "object"'),
])
def test_an_int_or_string_is_an_integer_or_a_string_and_nothing_else(value, message):
    schema = schema_of({"field": {"x-kubernetes-int-or-string": True}})

    assert errors(schema, {"field": 42}) == []
    assert errors(schema, {"field": "80%"}) == []
    assert errors(schema, {"field": value}) == [message]


def test_int_or_string_with_any_of_reports_the_any_of_at_the_root_as_the_real_server_does():
    schema = schema_of({"field": {"x-kubernetes-int-or-string": True, "nullable": True,
                                  "anyOf": [{"type": "integer"}, {"type": "string"}]}})

    assert errors(schema, {"field": True}) == [
        'spec.field: Invalid value: "boolean": spec.field in body must be of type '
        'integer,string: "boolean"',
        '<nil>: Invalid value: "": "spec.field" must validate at least one schema (anyOf)',
        'spec.field: Invalid value: "boolean": spec.field in body must be of type integer: '
        '"boolean"']
    assert errors(schema, {"field": None}) == []


def test_a_whole_number_is_an_integer_and_an_integer_is_a_number():
    schema = schema_of({"i": {"type": "integer"}, "n": {"type": "number"}})

    assert errors(schema, {"i": 3.0, "n": 3}) == []
    assert errors(schema, {"i": 3.5}) == [
        'spec.i: Invalid value: "number": spec.i in body must be of type integer: "number"']
    assert errors(schema, {"n": "3"}) == [
        'spec.n: Invalid value: "string": spec.n in body must be of type number: "string"']


def test_required_fields_enums_patterns_and_lengths_are_worded_like_kube_apiserver():
    schema = schema_of({
        "strategy": {"type": "string", "enum": ["StrictFIFO", "BestEffortFIFO"]},
        "name": {"type": "string", "maxLength": 5, "pattern": "^[a-z]+$"},
        "short": {"type": "string", "minLength": 2},
        "nested": {"type": "object", "required": ["inner"],
                   "properties": {"inner": {"type": "string"}}}})

    assert errors(schema, {"strategy": "Foo", "name": "toolong", "short": "a",
                           "nested": {}}) == [
        'spec.strategy: Unsupported value: "Foo": supported values: "StrictFIFO", '
        '"BestEffortFIFO"',
        "spec.name: Too long: may not be more than 5 bytes",
        'spec.short: Invalid value: "a": spec.short in body should be at least 2 chars long',
        "spec.nested.inner: Required value"]
    assert errors(schema, {"name": "Abc"}) == [
        "spec.name: Invalid value: \"Abc\": spec.name in body should match '^[a-z]+$'"]


def test_a_pattern_matches_anywhere_unless_anchored_and_dollar_ends_the_text():
    schema = schema_of({"a": {"type": "string", "pattern": "b"},
                        "z": {"type": "string", "pattern": "^x$"}})

    assert errors(schema, {"a": "abc", "z": "x"}) == []
    assert errors(schema, {"z": "x\n"}) == [
        "spec.z: Invalid value: \"x\\n\": spec.z in body should match '^x$'"]


def test_an_inline_case_flag_after_the_start_applies_to_the_rest_as_in_go():
    schema = schema_of({"name": {"type": "string",
                                 "pattern": "^(?i)[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}})

    assert errors(schema, {"name": "Slice-A"}) == []
    assert len(errors(schema, {"name": "-a"})) == 1


def test_number_bounds_and_item_and_property_counts():
    schema = schema_of({
        "count": {"type": "integer", "minimum": 1, "maximum": 8},
        "ratio": {"type": "number", "maximum": 1000000, "exclusiveMaximum": True},
        "items": {"type": "array", "minItems": 1, "maxItems": 2,
                  "items": {"type": "string"}},
        "labels": {"type": "object", "maxProperties": 1,
                   "additionalProperties": {"type": "string"}}})

    assert errors(schema, {"count": 0, "ratio": 1e6, "items": [], "labels": {"a": "1"}}) == [
        "spec.count: Invalid value: 0: spec.count in body should be greater than or equal "
        "to 1",
        "spec.ratio: Invalid value: 1e+06: spec.ratio in body should be less than 1e+06",
        "spec.items: Invalid value: 0: spec.items in body should have at least 1 items"]
    assert errors(schema, {"count": 9, "items": ["a", "b", "c"],
                           "labels": {"a": "1", "b": 2}}) == [
        "spec.count: Invalid value: 9: spec.count in body should be less than or equal to 8",
        "spec.items: Too many: 3: must have at most 2 items",
        "spec.labels: Too many: 2: must have at most 1 items",
        'spec.labels.b: Invalid value: "integer": spec.labels.b in body must be of type '
        'string: "integer"']


@pytest.mark.parametrize(("value", "ok"), [
    ("2026-01-01T00:00:00Z", True), ("2026-01-01T10:00:00.123+02:00", True),
    ("2026-01-01", False), ("2026-02-30T00:00:00Z", False), ("2026-01-01T24:00:00Z", False),
])
def test_date_times_are_checked_as_strfmt_checks_them(value, ok):
    schema = schema_of({"at": {"type": "string", "format": "date-time"}})

    expected = [] if ok else [f'spec.at: Invalid value: "{value}": spec.at in body must be of '
                              f'type date-time: "{value}"']
    assert errors(schema, {"at": value}) == expected


@pytest.mark.parametrize(("value", "ok"), [
    ("15s", True), ("1m30s", True), ("1.5h", True), ("5 days", True), ("soon", False),
])
def test_durations_are_go_durations_or_scala_like_ones(value, ok):
    schema = schema_of({"every": {"type": "string", "format": "duration"}})

    assert (errors(schema, {"every": value}) == []) is ok


def test_formats_the_server_strips_are_not_checked():
    schema = schema_of({"n": {"type": "integer", "format": "int32"}})

    assert errors(schema, {"n": 2 ** 40}) == []


def test_a_nullable_field_may_be_null_and_others_may_not():
    schema = schema_of({"maybe": {"type": "string", "nullable": True},
                        "never": {"type": "string"}})

    assert errors(schema, {"maybe": None}) == []
    assert errors(schema, {"never": None}) == [
        'spec.never: Invalid value: "null": spec.never in body must be of type string: "null"']


# --- pruning and defaulting --------------------------------------------------------------


def test_pruning_drops_undeclared_fields_except_below_preserve_unknown_fields():
    schema = schema_of({"known": {"type": "string"},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                 "properties": {"typed": {"type": "object",
                                                          "properties": {}}}}})
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
           "extra": 1, "spec": {"known": "k", "unknown": 1,
                                "free": {"anything": {"goes": 1}, "typed": {"x": 1}}}}

    pruned = decode(obj, schema)

    assert pruned == ["extra", "spec.free.typed.x", "spec.unknown"]
    assert obj == {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                   "spec": {"known": "k", "free": {"anything": {"goes": 1}, "typed": {}}}}


def test_defaults_fill_absent_and_non_nullable_null_fields_top_down():
    schema = schema_of({
        "policy": {"type": "object", "default": {},
                   "properties": {"mode": {"type": "string", "default": "Never"}}},
        "replicas": {"type": "integer", "default": 1},
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "protocol": {"type": "string", "default": "TCP"}}}},
        "dropped": {"type": "string"}})
    obj = {"spec": {"replicas": None, "items": [{}, {"protocol": "UDP"}], "dropped": None}}

    decode(obj, schema)

    assert obj["spec"] == {"policy": {"mode": "Never"}, "replicas": 1,
                           "items": [{"protocol": "TCP"}, {"protocol": "UDP"}]}


def test_jobset_defaults_of_the_v0_7_2_crd_are_applied():
    from sandbox.kubeapi.crd_schema import version_schema

    served = version_schema("jobset.x-k8s.io", "v1alpha2", "JobSet")
    assert served is not None
    obj = {"spec": {"failurePolicy": {"maxRestarts": 1},
                    "replicatedJobs": [{"name": "w", "template": {"spec": {"template": {
                        "spec": {"containers": [{"name": "c", "ports": [
                            {"containerPort": 8080}]}]}}}}}]}}

    decode(obj, served.schema)

    assert obj["spec"]["failurePolicy"] == {"maxRestarts": 1, "restartStrategy": "Recreate"}
    job = obj["spec"]["replicatedJobs"][0]
    assert job["replicas"] == 1
    assert job["template"]["spec"]["template"]["spec"]["containers"][0]["ports"] == [
        {"containerPort": 8080, "protocol": "TCP"}]
    # The webhook, not the CRD, defaults these: they stay absent here.
    assert "successPolicy" not in obj["spec"]
    assert "network" not in obj["spec"]


# --- list types and embedded resources ---------------------------------------------------


def test_set_lists_and_map_lists_refuse_duplicates():
    schema = schema_of({
        "tags": {"type": "array", "x-kubernetes-list-type": "set",
                 "items": {"type": "string"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "properties": {"name": {"type": "string"},
                                                             "port": {"type": "integer"}}}}})
    obj = {"spec": {"tags": ["a", "b", "a", "a"],
                    "ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}]}}

    assert [str(e) for e in validate_list_types(schema, obj)] == [
        'spec.tags[2]: Duplicate value: "a"',
        'spec.ports[1]: Duplicate value: map[string]interface {}{"name":"http"}']


def test_an_embedded_resource_needs_its_api_version_and_kind():
    schema = schema_of({"template": {"type": "object", "x-kubernetes-embedded-resource": True,
                                     "x-kubernetes-preserve-unknown-fields": True}})
    obj = {"spec": {"template": {"kind": "Pod", "metadata": {"name": "p"}, "spec": {}}}}

    assert decode(copy.deepcopy(obj), schema) == []
    assert [str(e) for e in validate_embedded(schema, obj)] == [
        "spec.template.apiVersion: Required value: must not be empty"]


# --- CEL rules ---------------------------------------------------------------------------


def test_a_rule_not_met_gives_its_message_at_its_node():
    schema = schema_of({"range": {"type": "object", "properties": {
        "min": {"type": "integer"}, "max": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.min <= self.max",
                                      "message": "min must not exceed max"}]}})

    assert rule_errors(schema, {"range": {"min": 1, "max": 2}}) == []
    assert rule_errors(schema, {"range": {"min": 3, "max": 2}}) == [
        'spec.range: Invalid value: "object": min must not exceed max']


def test_a_rule_without_a_message_names_itself_and_a_reason_changes_the_error_type():
    schema = schema_of({"port": {"type": "integer", "x-kubernetes-validations": [
        {"rule": "self != 0"}]},
        "secret": {"type": "object", "properties": {"namespace": {"type": "string"}},
                   "x-kubernetes-validations": [{
                       "rule": "!has(self.__namespace__)", "reason": "FieldValueForbidden",
                       "message": "Namespace not allowed"}]}})

    assert rule_errors(schema, {"port": 0, "secret": {"namespace": "x"}}) == [
        'spec.port: Invalid value: "integer": failed rule: self != 0',
        "spec.secret: Forbidden: Namespace not allowed"]


def test_a_message_expression_formats_durations_as_cel_does():
    schema = schema_of({"endpoint": {"type": "object", "properties": {
        "interval": {"type": "string", "format": "duration"},
        "timeout": {"type": "string", "format": "duration"}},
        "x-kubernetes-validations": [{
            "rule": "!has(self.timeout) || self.timeout <= self.interval",
            "messageExpression": "'scrape timeout (%s) must not be greater than scrape "
                                 "interval (%s)'.format([self.timeout, self.interval])"}]}})

    assert rule_errors(schema, {"endpoint": {"interval": "1m", "timeout": "30s"}}) == []
    assert rule_errors(schema, {"endpoint": {"interval": "30s", "timeout": "1m30s"}}) == [
        'spec.endpoint: Invalid value: "object": scrape timeout (90s) must not be greater '
        "than scrape interval (30s)"]


@pytest.mark.parametrize(("url", "ok"), [
    ("http://proxy.internal:3128", True), ("https://a/b?c", True), ("/path", True),
    ("mailto:a", True), ("proxy.internal", False), ("http://host:port", False), ("", False),
])
def test_is_url_accepts_what_gos_parse_request_uri_accepts(url, ok):
    schema = schema_of({"proxyUrl": {"type": "string", "x-kubernetes-validations": [
        {"rule": "isURL(self)"}]}})

    assert (rule_errors(schema, {"proxyUrl": url}) == []) is ok


def test_a_missing_field_a_rule_reads_is_a_no_such_key_error():
    schema = schema_of({"spec2": {"type": "object", "properties": {
        "topologyName": {"type": "string"},
        "nodeLabels": {"type": "object", "additionalProperties": {"type": "string"}}},
        "x-kubernetes-validations": [{"rule": "self.nodeLabels.size() >= 1",
                                      "message": "at least one nodeLabel"}]}})

    assert rule_errors(schema, {"spec2": {"topologyName": "t"}}) == [
        'spec.spec2: Invalid value: "object": no such key: nodeLabels evaluating rule: '
        "at least one nodeLabel"]


def immutable_schema() -> Schema:
    return schema_of({
        "queue": {"type": "string",
                  "x-kubernetes-validations": [{"rule": "self == oldSelf",
                                                "message": "field is immutable"}]},
        "jobs": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string",
                     "x-kubernetes-validations": [{"rule": "self == oldSelf",
                                                   "message": "name is immutable"}]}}}}})


def test_a_transition_rule_runs_on_update_only():
    schema = immutable_schema()

    assert rule_errors(schema, {"queue": "b"}) == []
    assert rule_errors(schema, {"queue": "b"}, {"queue": "a"}) == [
        'spec.queue: Invalid value: "string": field is immutable']


def test_a_transition_rule_under_an_atomic_list_never_runs():
    schema = immutable_schema()

    assert rule_errors(schema, {"jobs": [{"name": "b"}]}, {"jobs": [{"name": "a"}]}) == []


def test_on_update_a_rule_is_not_held_against_an_unchanged_value():
    schema = schema_of({"a": {"type": "integer", "x-kubernetes-validations": [
        {"rule": "self > 0", "message": "positive"}]}, "b": {"type": "string"}})

    assert rule_errors(schema, {"a": 0, "b": "y"}, {"a": 0, "b": "x"}, ratchet=True) == []
    assert rule_errors(schema, {"a": -1, "b": "y"}, {"a": 0, "b": "x"}, ratchet=True) == [
        'spec.a: Invalid value: "integer": positive']


def test_on_update_schema_errors_of_unchanged_values_are_dropped():
    schema = schema_of({"name": {"type": "string", "maxLength": 3}, "b": {"type": "string"}})
    old = {"spec": {"name": "toolong", "b": "x"}}

    assert validate_value(schema, {"spec": {"name": "toolong", "b": "y"}}, old=old) == []
    assert [str(e) for e in validate_value(schema, {"spec": {"name": "longer", "b": "y"}},
                                           old=old)] == [
        "spec.name: Too long: may not be more than 3 bytes"]


def test_a_rule_calling_a_function_the_sandbox_lacks_fails_to_compile():
    with pytest.raises(cel.UnsupportedRule, match="quantity"):
        cel.compile_rule({"rule": "quantity(self).isGreaterThan(quantity('1'))"})


def test_property_names_are_escaped_as_kubernetes_escapes_them():
    assert [cel.escape(n) for n in ("namespace", "a-b", "x.y", "a/b", "a__b", "ok", "1x")] == [
        "__namespace__", "a__dash__b", "x__dot__y", "a__slash__b", "a__underscores__b", "ok",
        None]


# --- the 422 ----------------------------------------------------------------------------


def test_one_error_is_unbracketed_and_several_are_listed_once_each():
    one = invalid_error("kueue.x-k8s.io", "LocalQueue", "q", [required("spec.clusterQueue")])
    two = invalid_error("jobset.x-k8s.io", "JobSet", "j", [
        required("spec.a"), required("spec.a"),
        FieldError("FieldValueNotSupported", "spec.b", "x", 'supported values: "y"')])

    assert one.code == 422
    assert one.reason == "Invalid"
    assert one.message == ('LocalQueue.kueue.x-k8s.io "q" is invalid: spec.clusterQueue: '
                           "Required value")
    assert two.message == ('JobSet.jobset.x-k8s.io "j" is invalid: [spec.a: Required value, '
                           'spec.b: Unsupported value: "x": supported values: "y"]')
    assert two.details is not None
    assert [c["reason"] for c in two.details["causes"]] == [
        "FieldValueRequired", "FieldValueRequired", "FieldValueNotSupported"]
    assert two.details["causes"][2] == {"reason": "FieldValueNotSupported", "field": "spec.b",
                                        "message": 'Unsupported value: "x": supported '
                                                   'values: "y"'}


@pytest.mark.parametrize(("rule", "value"), [
    ('self.split("/") == ["a", "b", "c"]', "a/b/c"),
    ('self.split("/", 2) == ["a", "b/c"]', "a/b/c"),
    ('self.split("/", 0) == []', "a/b/c"),
    ('self.split("") == ["a", "b"]', "ab"),
    ('self.split("/")[0].size() < 253', "example.com/key"),
])
def test_split_behaves_as_go_strings_split_n_as_cel_go_ext_strings_does(rule, value):
    schema = schema_of({"field": {"type": "string",
                                  "x-kubernetes-validations": [{"rule": rule}]}})

    assert rule_errors(schema, {"field": value}) == []
