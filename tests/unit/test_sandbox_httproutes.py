"""Which rule of which HTTPRoute takes a request, and which backend: the Gateway API
v1.2.1 HTTPRoute specification's matching, precedence and weight rules."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.cluster.httproutes import (
    BackendRef,
    Choice,
    Request,
    choose_backend,
    path_matches,
    select_rule,
)


def get(path: str, method: str = "GET", **headers: str) -> Request:
    return Request(method, path, {k.lower(): v for k, v in headers.items()}, {})


def route(name: str, *rules: list[dict[str, Any]], created: str = "2026-11-28T08:00:00Z",
          namespace: str = "serving") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "creationTimestamp": created},
            "spec": {"rules": [{"matches": matches} for matches in rules]}}


def prefix(value: str, **extra: Any) -> dict[str, Any]:
    return {"path": {"type": "PathPrefix", "value": value}, **extra}


@pytest.mark.parametrize(("value", "path", "taken"), [
    ("/v2/models/toy", "/v2/models/toy", True),
    ("/v2/models/toy", "/v2/models/toy/", True),
    ("/v2/models/toy", "/v2/models/toy/infer", True),
    ("/v2/models/toy", "/v2/models/toy2/infer", False),  # whole path elements only
    ("/v2/models/toy/", "/v2/models/toy", True),  # a trailing slash is ignored
    ("/", "/anything", True),
    ("/v2/models/toy", "/v2/models", False),
])
def test_a_path_prefix_matches_whole_path_elements(value, path, taken):
    assert path_matches("PathPrefix", value, path) is taken


def test_an_exact_path_matches_only_itself_and_beats_any_prefix():
    routes = [route("long", [prefix("/v2/models/toy")]),
              route("exact", [{"path": {"type": "Exact", "value": "/v2/models/toy/ready"}}])]

    assert select_rule(routes, get("/v2/models/toy/ready")) == Choice("serving/exact", 0)
    assert select_rule(routes, get("/v2/models/toy/ready/x")) == Choice("serving/long", 0)


def test_the_longest_prefix_wins_across_routes_then_method_then_headers():
    routes = [route("root", [prefix("/")]),
              route("model", [prefix("/v2/models/toy")],
                    [prefix("/v2/models/toy", method="POST")],
                    [prefix("/v2/models/toy", method="POST",
                            headers=[{"name": "X-Canary", "value": "1"}])])]

    assert select_rule(routes, get("/other")) == Choice("serving/root", 0)
    assert select_rule(routes, get("/v2/models/toy/infer")) == Choice("serving/model", 0)
    assert select_rule(routes, get("/v2/models/toy/infer", "POST")) == Choice("serving/model", 1)
    assert select_rule(routes, get("/v2/models/toy/infer", "POST", **{"x-canary": "1"})) \
        == Choice("serving/model", 2)


def test_a_tie_goes_to_the_oldest_route_then_the_first_by_namespace_and_name():
    same = [prefix("/v2")]
    routes = [route("b", same, created="2026-11-28T08:00:00Z"),
              route("a", same, created="2026-11-28T09:00:00Z")]

    assert select_rule(routes, get("/v2/x")) == Choice("serving/b", 0)
    routes[0]["metadata"]["creationTimestamp"] = "2026-11-28T09:00:00Z"
    assert select_rule(routes, get("/v2/x")) == Choice("serving/a", 0)


def test_no_matching_rule_is_none_which_the_gateway_answers_404():
    assert select_rule([route("model", [prefix("/v2/models/toy")])],
                       get("/v2/models/other/infer")) is None


def test_each_draw_lands_on_the_backend_owning_that_slice_of_the_total_weight():
    refs = [BackendRef("old", 95, 1), BackendRef("new", 5, 2)]

    taken = [choose_backend(refs, lambda n, p=point: p)[1].name for point in range(100)]

    assert taken == ["old"] * 95 + ["new"] * 5


def test_zero_weights_and_invalid_backends_answer_500():
    assert choose_backend([BackendRef("a", 0, 1), BackendRef("b", 0, 2)], lambda n: 0) \
        == (500, None)
    assert choose_backend([], lambda n: 0) == (500, None)
    missing = BackendRef("gone", 1, None, "BackendNotFound")
    assert choose_backend([BackendRef("a", 1, 1), missing], lambda n: 1) == (500, missing)
    assert choose_backend([BackendRef("a", 0, 1), BackendRef("b", 3, 2)], lambda n: 0)[1] \
        == BackendRef("b", 3, 2)
