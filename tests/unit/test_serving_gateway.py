"""The model's HTTPRoute, its release Services' names and health checks, and that the
pinned Gateway API and GKE CRDs accept what is rendered and refuse what the real API
server refuses, with its words."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from sandbox.kubeapi.custom_resources import decode_custom_resource, validate_custom_resource
from shared.config import ServingConfig
from shared.serving.gateway import (
    MAX_WEIGHT,
    Backend,
    render_health_check,
    render_route,
    route_weights,
)
from shared.serving.triton import release_id, release_name

CONFIG = ServingConfig()
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def errors_of(obj: dict[str, Any]) -> list[str]:
    """The field errors the sandbox API (the pinned CRDs) finds in ``obj``."""
    body = copy.deepcopy(obj)
    group, _, version = body["apiVersion"].rpartition("/")
    decode_custom_resource(group, version, body["kind"], body)
    return [str(e) for e in validate_custom_resource(group, version, body["kind"], body, None)]


def a_route(*weights: int) -> dict[str, Any]:
    backends = [Backend(f"toy-lm-r-{i:012x}", w) for i, w in enumerate(weights)]
    return render_route("toy-lm", "toy-lm", backends, CONFIG)


def test_a_release_service_is_the_deployment_and_the_release_id():
    rid = release_id("gs://models/toy-lm/v2/deploy.yaml#17")

    assert release_name("toy-lm", rid) == f"toy-lm-{rid}"


def test_long_deployments_sharing_a_prefix_get_distinct_valid_service_names():
    rid = release_id("gs://models/x/v1/deploy.yaml#1")
    first = release_name("a" * 55 + "-one", rid)
    second = release_name("a" * 55 + "-two", rid)

    assert first != second
    for name in (first, second):
        assert len(name) <= 63
        assert DNS_1035.match(name), name
        assert name.endswith(f"-{rid}")
        assert name.startswith("a" * 30)


def test_the_same_inputs_always_name_the_same_service_and_any_release_id_fits():
    odd = "Release_ID/with:odd-characters-and-far-too-long-for-a-name"

    assert release_name("toy", odd) == release_name("toy", odd)
    assert DNS_1035.match(release_name("toy", odd))
    assert DNS_1035.match(release_name("9lives" * 12, "r-1"))
    assert len(release_name("9lives" * 12, "r-1")) <= 63


@pytest.mark.parametrize("weight", [-1, MAX_WEIGHT + 1, True])
def test_a_backend_weight_outside_what_the_api_allows_is_refused(weight):
    with pytest.raises(ValueError, match="weight"):
        Backend("toy-lm-r-1", weight)


def test_the_route_sends_the_models_v2_paths_to_its_release_services_by_weight():
    route = a_route(95, 5)

    assert route["metadata"] == {
        "name": "toy-lm", "namespace": "serving",
        "labels": {"app.kubernetes.io/name": "triton", "app.kubernetes.io/instance": "toy-lm",
                   "accelops.dev/model": "toy-lm", "app.kubernetes.io/managed-by": "accelops"}}
    assert route["spec"]["parentRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "models"}]
    (rule,) = route["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/v2/models/toy-lm"}}]
    assert [(b["name"], b["port"], b["weight"]) for b in rule["backendRefs"]] == [
        ("toy-lm-r-000000000000", 8000, 95), ("toy-lm-r-000000000001", 8000, 5)]
    assert route_weights(route) == {"toy-lm-r-000000000000": 95, "toy-lm-r-000000000001": 5}


def test_a_route_with_no_backend_too_many_or_one_service_twice_is_refused():
    with pytest.raises(ValueError, match="at least one"):
        render_route("m", "m", [], CONFIG)
    with pytest.raises(ValueError, match="at most 16"):
        a_route(*[1] * 17)
    with pytest.raises(ValueError, match="twice"):
        render_route("m", "m", [Backend("m-r-1", 1), Backend("m-r-1", 2)], CONFIG)


def test_the_route_and_the_health_check_fit_the_pinned_crds():
    assert errors_of(a_route(95, 5)) == []
    assert errors_of(a_route(0, 100)) == []
    assert errors_of(a_route(*[1] * 16)) == []
    assert errors_of(render_health_check("toy-lm-r-1", CONFIG)) == []


def test_the_health_check_probes_tritons_readiness_on_its_http_port():
    policy = render_health_check("toy-lm-r-1", CONFIG)

    assert policy["metadata"]["namespace"] == "serving"
    assert policy["spec"]["targetRef"] == {"group": "", "kind": "Service", "name": "toy-lm-r-1"}
    assert policy["spec"]["default"]["config"]["httpHealthCheck"] == {
        "portSpecification": "USE_FIXED_PORT", "port": 8000, "requestPath": "/v2/health/ready"}


# --- what the real API server refuses ----------------------------------------------------


def test_a_weight_over_a_million_is_refused_as_the_api_server_refuses_it():
    route = a_route(95, 5)
    route["spec"]["rules"][0]["backendRefs"][0]["weight"] = MAX_WEIGHT + 1

    assert errors_of(route) == [
        "spec.rules[0].backendRefs[0].weight: Invalid value: 1000001: "
        "spec.rules[0].backendRefs[0].weight in body should be less than or equal to 1000000"]


def test_seventeen_backend_refs_are_refused_as_the_api_server_refuses_them():
    route = a_route(*[1] * 16)
    extra = dict(route["spec"]["rules"][0]["backendRefs"][0], name="toy-lm-r-extra")
    route["spec"]["rules"][0]["backendRefs"].append(extra)

    # Schema errors stop the CEL rules, and the server says so (apiextensions-apiserver).
    assert errors_of(route) == [
        "spec.rules[0].backendRefs: Too many: 17: must have at most 16 items",
        '<nil>: Invalid value: "null": some validation rules were not checked because the '
        "object was invalid; correct the existing errors to complete validation"]


def test_a_prefix_with_a_double_slash_fails_the_crds_cel_rule():
    route = a_route(1)
    route["spec"]["rules"][0]["matches"][0]["path"]["value"] = "/v2//models"

    assert errors_of(route) == [
        "spec.rules[0].matches[0].path: Invalid value: \"object\": must not contain '//' "
        "when type one of ['Exact', 'PathPrefix']"]
