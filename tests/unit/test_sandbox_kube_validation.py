"""Names and labels are refused in k8s.io/apimachinery v0.32.0's words, wherever they are.

Expected texts are apimachinery's: ``pkg/util/validation/validation.go`` (the ``Is*``
checks), ``pkg/api/validation/objectmeta.go`` (``ValidateObjectMeta``: every problem of a
name or label is one ``field.Invalid`` of the name or key, or of the value), and
``pkg/util/validation/field/errors.go`` (``ErrorBody``: a nil value prints as ``"null"``);
JobSet v0.7.2's ``ValidateImmutableField(js.Spec.ManagedBy, ...)`` compares ``*string``s."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.kubeapi import field_errors as fe
from sandbox.kubeapi.admission import jobset
from sandbox.kubeapi.crd_lists import validate_embedded
from sandbox.kubeapi.crd_schema import Schema, compile_crd
from sandbox.kubeapi.errors import ApiError
from sandbox.kubeapi.store import ObjectStore
from sandbox.kubeapi.validation import is_dns1123_label, is_qualified_name

SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
             "characters, '-' or '.', and must start and end with an alphanumeric character "
             "(e.g. 'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
         "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
         "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
NAME_PART = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must "
             "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
             "or '123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
LABEL_VALUE = ("a valid label must be an empty string or consist of alphanumeric characters, "
               "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
               "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
               "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


@pytest.fixture
def store() -> ObjectStore:
    store = ObjectStore()
    store.create("", "namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": "default"}})
    return store


def refusal(store: ObjectStore, resource: str, metadata: dict[str, Any]) -> ApiError:
    kind = "Namespace" if resource == "namespaces" else "ConfigMap"
    if resource != "namespaces":
        metadata = {"namespace": "default", **metadata}
    with pytest.raises(ApiError) as caught:
        store.create("", resource, {"apiVersion": "v1", "kind": kind, "metadata": metadata})
    assert caught.value.code == 422
    return caught.value


def test_a_name_that_is_not_a_subdomain_is_refused_with_apimachinery_regex_message(
        store: ObjectStore) -> None:
    error = refusal(store, "configmaps", {"name": "Train"})

    assert error.message == (f'ConfigMap "Train" is invalid: metadata.name: Invalid value: '
                             f'"Train": {SUBDOMAIN}')
    assert error.details == {"name": "Train", "kind": "ConfigMap", "causes": [
        {"reason": "FieldValueInvalid", "field": "metadata.name",
         "message": f'Invalid value: "Train": {SUBDOMAIN}'}]}


def test_a_name_too_long_and_malformed_gets_both_problems(store: ObjectStore) -> None:
    name = "x" * 253 + "_"

    message = refusal(store, "configmaps", {"name": name}).message

    assert message == (f'ConfigMap "{name}" is invalid: [metadata.name: Invalid value: '
                       f'"{name}": must be no more than 253 characters, metadata.name: '
                       f'Invalid value: "{name}": {SUBDOMAIN}]')


@pytest.mark.parametrize(("name", "problem"), [
    ("Research", LABEL),
    ("team.research", "must not contain dots"),
    ("n" * 64, "must be no more than 63 characters"),
])
def test_a_namespace_name_must_be_an_rfc_1123_label(store: ObjectStore, name: str,
                                                   problem: str) -> None:
    message = refusal(store, "namespaces", {"name": name}).message

    assert message == f'Namespace "{name}" is invalid: metadata.name: Invalid value: ' \
                      f'"{name}": {problem}'


def test_a_missing_name_is_required_and_the_details_leave_out_the_empty_name(
        store: ObjectStore) -> None:
    error = refusal(store, "configmaps", {})

    assert error.message == ('ConfigMap "" is invalid: metadata.name: Required value: name '
                             "or generateName is required")
    assert error.details == {"kind": "ConfigMap", "causes": [
        {"reason": "FieldValueRequired", "field": "metadata.name",
         "message": "Required value: name or generateName is required"}]}


def test_a_bad_label_key_is_shown_as_the_invalid_value(store: ObjectStore) -> None:
    message = refusal(store, "configmaps", {"name": "c", "labels": {"Bad Key": "v"}}).message

    assert message == (f'ConfigMap "c" is invalid: metadata.labels: Invalid value: '
                       f'"Bad Key": {NAME_PART}')


def test_every_bad_label_is_reported_at_once(store: ObjectStore) -> None:
    labels = {"team/": "ok", "tier": "front end"}

    message = refusal(store, "configmaps", {"name": "c", "labels": labels}).message

    assert message == ('ConfigMap "c" is invalid: [metadata.labels: Invalid value: "team/": '
                       "name part must be non-empty, metadata.labels: Invalid value: "
                       f'"team/": {NAME_PART}, metadata.labels: Invalid value: "front end": '
                       f"{LABEL_VALUE}]")


@pytest.mark.parametrize("text", ["ab\n", "a/b/c", "a" * 64])
def test_trailing_newlines_slashes_and_length_fail_the_qualified_name_check(text: str) -> None:
    assert is_qualified_name(text)


def test_the_label_check_accepts_what_kubernetes_accepts() -> None:
    assert is_dns1123_label("a" * 63) == []
    assert is_qualified_name("example.com/My_Name.1") == []


def embedded_schema() -> Schema:
    document = {"spec": {"group": "example.com", "scope": "Namespaced",
                         "names": {"kind": "Widget", "plural": "widgets"},
                         "versions": [{"name": "v1", "served": True, "storage": True,
                                       "schema": {"openAPIV3Schema": {
                                           "type": "object", "properties": {"spec": {
                                               "type": "object", "properties": {"inner": {
                                                   "type": "object",
                                                   "x-kubernetes-embedded-resource": True,
                                                   "x-kubernetes-preserve-unknown-fields":
                                                       True}}}}}}}]}}
    return compile_crd(document).versions["v1"].schema


def test_an_embedded_kind_too_long_names_its_length_as_apiextensions_does() -> None:
    kind = "K" * 64

    found = validate_embedded(embedded_schema(),
                              {"spec": {"inner": {"apiVersion": "v1", "kind": kind}}})

    assert [str(e) for e in found] == [
        f'spec.inner.kind: Invalid value: "{kind}": may have mixed case, but should otherwise '
        "match: must be no more than 63 characters"]


def test_a_removed_jobset_manager_prints_as_go_prints_a_nil_pointer() -> None:
    old = {"metadata": {"name": "t"}, "spec": {"managedBy": "example.com/manager"}}
    new = {"metadata": {"name": "t"}, "spec": {}}

    assert jobset.validate_update(new, old) == (
        'spec.managedBy: Invalid value: "null": field is immutable')


@pytest.mark.parametrize(("value", "shown"), [
    (None, '"null"'),
    ("x", '"x"'),
    (fe.Bare("cpu"), "cpu"),
    (fe.GoValue("v1.Taint{...}"), "v1.Taint{...}"),
    (3, "3"),
    (1e6, "1e+06"),
    ({"b": 1, "a": "x"}, 'map[string]interface {}{"a":"x", "b":1}'),
])
def test_bad_values_print_as_error_body_prints_them(value: object, shown: str) -> None:
    assert str(fe.invalid("f", value, "d")) == f"f: Invalid value: {shown}: d"


def test_the_webhooks_too_long_max_length_keeps_apimachinery_v0_31_wording() -> None:
    assert str(fe.too_long_max_length("spec.managedBy", "x", 63)) == (
        "spec.managedBy: Too long: may not be longer than 63")
    assert str(fe.too_long("spec.name", 63)) == "spec.name: Too long: may not be more than 63 bytes"
