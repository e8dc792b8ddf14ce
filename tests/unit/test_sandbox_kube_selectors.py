"""Label and field selectors of the sandbox Kubernetes API."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.kubeapi.selectors import (
    DOES_NOT_EXIST,
    EQUALS,
    EXISTS,
    IN,
    NOT_EQUALS,
    NOT_IN,
    Requirement,
    SelectorError,
    field_value,
    label_selector_from_match_labels,
    parse_field_selector,
    parse_label_selector,
)

LABELS = {"env": "prod", "tier": "2", "jobset.sigs.k8s.io/jobset-name": "train"}


@pytest.mark.parametrize(
    ("selector", "requirement"),
    [
        ("a=b", Requirement("a", EQUALS, ("b",))),
        ("a==b", Requirement("a", EQUALS, ("b",))),
        ("a!=b", Requirement("a", NOT_EQUALS, ("b",))),
        ("env in (a, b)", Requirement("env", IN, ("a", "b"))),
        ("env notin (a)", Requirement("env", NOT_IN, ("a",))),
        ("key", Requirement("key", EXISTS)),
        ("!key", Requirement("key", DOES_NOT_EXIST)),
        ("a=", Requirement("a", EQUALS, ("",))),
    ],
)
def test_each_label_operator_parses_into_one_requirement(
    selector: str, requirement: Requirement
) -> None:
    assert parse_label_selector(selector).requirements == (requirement,)


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("env=prod", True),
        ("env==dev", False),
        ("env!=dev", True),
        ("missing!=x", True),
        ("env in (dev,prod)", True),
        ("env notin (prod)", False),
        ("missing notin (prod)", True),
        ("env", True),
        ("!env", False),
        ("!missing", True),
        ("tier>1", True),
        ("tier<2", False),
        ("env=prod,tier=3", False),
        ("env=prod, tier in (1,2)", True),
        ("jobset.sigs.k8s.io/jobset-name=train", True),
        ("", True),
    ],
)
def test_label_selectors_match_like_the_real_api(selector: str, matches: bool) -> None:
    assert parse_label_selector(selector).matches(LABELS) is matches


def test_an_object_without_labels_matches_only_absence_requirements() -> None:
    assert parse_label_selector("!env,env notin (x)").matches(None)
    assert not parse_label_selector("env").matches(None)


@pytest.mark.parametrize(
    "selector",
    [
        "env in (prod",
        "env in prod",
        "env in ()",
        "=b",
        "a b",
        "a=b=c",
        "tier>x",
        "Bad Key=1",
        "-a=b",
        "a=" + "x" * 64,
        "UPPER.example.com/a=b",
        "a=b,",
    ],
)
def test_malformed_label_selectors_raise_selector_error(selector: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(selector)


@given(
    st.dictionaries(
        st.from_regex(r"[a-z][a-z0-9]{0,10}", fullmatch=True),
        st.from_regex(r"([a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?)?", fullmatch=True),
        max_size=5,
    )
)
def test_a_match_labels_selector_matches_the_labels_it_was_built_from(
    labels: dict[str, str],
) -> None:
    selector = label_selector_from_match_labels(labels)
    assert selector.matches(labels)
    assert selector.matches({**labels, "extra-key": "v"})


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("metadata.name=train", True),
        ("metadata.name==train", True),
        ("metadata.name!=train", False),
        ("metadata.namespace=team-a", True),
        ("metadata.namespace=team-a,metadata.name!=other", True),
        ("metadata.namespace!=team-a", False),
        ("spec.suspend=true", True),
        ("status.phase=", True),
        ("", True),
    ],
)
def test_field_selectors_compare_string_forms_of_object_paths(selector: str, matches: bool) -> None:
    obj = {"metadata": {"name": "train", "namespace": "team-a"}, "spec": {"suspend": True}}
    assert parse_field_selector(selector).matches(obj) is matches


def test_field_selector_values_may_escape_commas_and_equals() -> None:
    selector = parse_field_selector(r"metadata.name=a\,b\=c")
    assert selector.terms[0].value == "a,b=c"
    assert selector.matches({"metadata": {"name": "a,b=c"}})


@pytest.mark.parametrize("selector", ["metadata.name", "=x", "metadata.name=a,b", r"a=b\q"])
def test_malformed_field_selectors_raise_selector_error(selector: str) -> None:
    with pytest.raises(SelectorError):
        parse_field_selector(selector)


def test_unsupported_field_labels_are_refused() -> None:
    selector = parse_field_selector("metadata.name=a,spec.nodeName=n")
    selector.require_supported({"metadata.name", "spec.nodeName"})
    with pytest.raises(SelectorError, match=r"field label not supported: spec\.nodeName"):
        selector.require_supported({"metadata.name"})


def test_field_value_of_a_missing_path_is_empty() -> None:
    assert field_value({"spec": {"nodeName": None}}, "spec.nodeName") == ""
    assert field_value({"spec": "scalar"}, "spec.nodeName") == ""
    assert field_value({"status": {"count": 3}}, "status.count") == "3"
