"""PATCH flavours of the sandbox Kubernetes API."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.kubeapi.errors import ApiError
from sandbox.kubeapi.patch import (
    PatchType,
    apply_patch,
    apply_patch_body,
    decode_patch_body,
    json_equal,
    json_patch,
    merge_patch,
    patch_type_for,
    strategic_merge_patch,
)

# ---------------------------------------------------------------- RFC 7386


@pytest.mark.parametrize(
    ("target", "patch", "result"),
    [  # RFC 7386 appendix A
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"a": "foo"}, None, None),
        ({"a": "foo"}, "bar", "bar"),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_follows_the_rfc_7386_examples(target: Any, patch: Any, result: Any) -> None:
    assert merge_patch(target, patch) == result


def test_merge_patch_does_not_modify_its_inputs() -> None:
    target = {"spec": {"a": 1, "b": {"c": 2}}}
    patch = {"spec": {"b": {"c": None}}}
    before = (copy.deepcopy(target), copy.deepcopy(patch))
    merge_patch(target, patch)
    assert (target, patch) == before


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda children: st.dictionaries(st.text(max_size=3), children, max_size=4),
        max_leaves=10,
    )
)
def test_merge_patching_an_object_with_itself_is_idempotent(doc: Any) -> None:
    once = merge_patch({}, doc)
    assert merge_patch(once, once) == once


# ---------------------------------------------------------------- RFC 6902


@pytest.mark.parametrize(
    ("doc", "operations", "result"),
    [  # RFC 6902 appendix A (the successful cases)
        (
            {"foo": "bar"},
            [{"op": "add", "path": "/baz", "value": "qux"}],
            {"baz": "qux", "foo": "bar"},
        ),
        (
            {"foo": ["bar", "baz"]},
            [{"op": "add", "path": "/foo/1", "value": "qux"}],
            {"foo": ["bar", "qux", "baz"]},
        ),
        ({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
        (
            {"foo": ["bar", "qux", "baz"]},
            [{"op": "remove", "path": "/foo/1"}],
            {"foo": ["bar", "baz"]},
        ),
        (
            {"baz": "qux", "foo": "bar"},
            [{"op": "replace", "path": "/baz", "value": "boo"}],
            {"baz": "boo", "foo": "bar"},
        ),
        (
            {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
            [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
            {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}},
        ),
        (
            {"foo": ["all", "grass", "cows", "eat"]},
            [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
            {"foo": ["all", "cows", "eat", "grass"]},
        ),
        (
            {"baz": "qux", "foo": ["a", 2, "c"]},
            [
                {"op": "test", "path": "/baz", "value": "qux"},
                {"op": "test", "path": "/foo/1", "value": 2},
            ],
            {"baz": "qux", "foo": ["a", 2, "c"]},
        ),
        (
            {"foo": "bar"},
            [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
            {"foo": "bar", "child": {"grandchild": {}}},
        ),
        (
            {"foo": ["bar"]},
            [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
            {"foo": ["bar", ["abc", "def"]]},
        ),
        ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}], {"/": 9, "~1": 10}),
        (
            {"a": {"b": 1}},
            [{"op": "copy", "from": "/a", "path": "/c"}],
            {"a": {"b": 1}, "c": {"b": 1}},
        ),
        ({"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}], {"b": 2}),
    ],
)
def test_json_patch_follows_the_rfc_6902_examples(
    doc: Any, operations: list[dict[str, Any]], result: Any
) -> None:
    assert json_patch(doc, operations) == result


@pytest.mark.parametrize(
    ("doc", "operations"),
    [
        ({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}]),
        ({"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}]),
        ({"foo": "bar"}, [{"op": "remove", "path": "/nope"}]),
        ({"foo": "bar"}, [{"op": "replace", "path": "/nope", "value": 1}]),
        ({"foo": [1]}, [{"op": "add", "path": "/foo/5", "value": 1}]),
        ({"foo": [1]}, [{"op": "remove", "path": "/foo/01"}]),
        ({"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": "/a/b/c"}]),
        ({"a": 1}, [{"op": "test", "path": "/a", "value": True}]),
    ],
)
def test_json_patch_that_cannot_apply_raises_422(doc: Any, operations: Any) -> None:
    with pytest.raises(ApiError) as caught:
        json_patch(doc, operations)
    assert (caught.value.code, caught.value.reason) == (422, "Invalid")


@pytest.mark.parametrize(
    "operations",
    [
        {"op": "add", "path": "/a", "value": 1},
        [{"op": "frobnicate", "path": "/a"}],
        [{"op": "add", "value": 1}],
        [{"op": "add", "path": "/a"}],
        [{"op": "add", "path": "a", "value": 1}],
        ["not-an-object"],
    ],
)
def test_malformed_json_patch_raises_400(operations: Any) -> None:
    with pytest.raises(ApiError) as caught:
        json_patch({"a": 0}, operations)
    assert (caught.value.code, caught.value.reason) == (400, "BadRequest")


def test_json_patch_is_atomic_and_leaves_the_target_untouched() -> None:
    doc = {"spec": {"replicas": 1}}
    with pytest.raises(ApiError):
        json_patch(
            doc,
            [
                {"op": "replace", "path": "/spec/replicas", "value": 5},
                {"op": "test", "path": "/spec/replicas", "value": 1},
            ],
        )
    assert doc == {"spec": {"replicas": 1}}


def test_json_equality_distinguishes_booleans_from_numbers() -> None:
    assert json_equal({"a": [1, 2.0]}, {"a": [1.0, 2]})
    assert not json_equal(True, 1)
    assert not json_equal([0], [False])
    assert not json_equal("1", 1)


# ---------------------------------------------------------------- strategic merge / apply


def test_strategic_merge_is_a_merge_patch_without_directives() -> None:
    target = {"spec": {"containers": [{"name": "a", "image": "x"}]}, "metadata": {}}
    patch = {
        "$setElementOrder/containers": [{"name": "b"}],
        "spec": {"containers": [{"name": "b", "image": "y"}], "$retainKeys": ["containers"]},
    }
    assert strategic_merge_patch(target, patch) == {
        "spec": {"containers": [{"name": "b", "image": "y"}]},
        "metadata": {},
    }


def test_apply_without_a_live_object_builds_it_from_the_applied_config() -> None:
    applied = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}
    assert apply_patch(None, applied) == applied


def test_apply_merges_maps_and_replaces_lists() -> None:
    live = {"apiVersion": "v1", "kind": "X", "spec": {"a": 1, "list": [1, 2]}}
    applied = {"apiVersion": "v1", "kind": "X", "spec": {"b": 2, "list": [3]}}
    assert apply_patch(live, applied)["spec"] == {"a": 1, "b": 2, "list": [3]}


@pytest.mark.parametrize("applied", [{"kind": "X"}, {"apiVersion": "v1"}, ["not", "a", "map"]])
def test_apply_requires_an_object_with_api_version_and_kind(applied: Any) -> None:
    with pytest.raises(ApiError) as caught:
        apply_patch({}, applied)
    assert caught.value.code == 400


# ---------------------------------------------------------------- content types and bodies


@pytest.mark.parametrize(
    ("content_type", "patch_type"),
    [
        ("application/json-patch+json", PatchType.JSON),
        ("application/merge-patch+json", PatchType.MERGE),
        ("application/strategic-merge-patch+json; charset=utf-8", PatchType.STRATEGIC),
        ("Application/Apply-Patch+YAML", PatchType.APPLY),
    ],
)
def test_patch_content_types_select_the_patch_flavour(
    content_type: str, patch_type: PatchType
) -> None:
    assert patch_type_for(content_type) is patch_type


@pytest.mark.parametrize("content_type", ["application/json", "text/plain", None])
def test_other_patch_content_types_raise_415(content_type: str | None) -> None:
    with pytest.raises(ApiError) as caught:
        patch_type_for(content_type)
    assert (caught.value.code, caught.value.reason) == (415, "UnsupportedMediaType")


def test_apply_bodies_may_be_yaml_or_json() -> None:
    yaml_body = decode_patch_body(PatchType.APPLY, b"kind: X\nspec:\n  a: 1\n")
    json_body = decode_patch_body(PatchType.APPLY, b'{"kind": "X", "spec": {"a": 1}}')
    assert yaml_body == json_body == {"kind": "X", "spec": {"a": 1}}


def test_undecodable_patch_bodies_raise_400() -> None:
    with pytest.raises(ApiError) as caught:
        decode_patch_body(PatchType.MERGE, b"{not json")
    assert caught.value.code == 400


def test_apply_patch_body_dispatches_on_the_patch_type() -> None:
    target = {"apiVersion": "v1", "kind": "X", "spec": {"a": 1}}
    assert apply_patch_body(PatchType.MERGE, target, {"spec": {"a": None}})["spec"] == {}
    assert (
        apply_patch_body(PatchType.JSON, target, [{"op": "remove", "path": "/spec/a"}])["spec"]
        == {}
    )
    assert apply_patch_body(PatchType.STRATEGIC, target, {"spec": {"b": 2}})["spec"] == {
        "a": 1,
        "b": 2,
    }
    assert apply_patch_body(
        PatchType.APPLY, target, {"apiVersion": "v1", "kind": "X", "spec": {"c": 3}}
    )["spec"] == {"a": 1, "c": 3}
