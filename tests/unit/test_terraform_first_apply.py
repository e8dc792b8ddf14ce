"""A first apply in a new project: the APIs, the service agents and the grants a creation
relies on exist, and have settled, before that creation; the provider names a quota
project, so user credentials from gcloud work."""

from __future__ import annotations

from tests.unit.test_terraform_definition import example_module
from tests.unit.test_terraform_modules import (
    EXAMPLE,
    MODULES,
    blocks,
    load_dir,
    resources,
)

PROJECT = MODULES / "project_services"
# Modules that create nothing before the project is ready: the provider-free one, and
# the archive, whose upload waits for the bucket it names.
NO_DEPENDS_ON = {"cluster_scope", "function_source"}


def test_the_apis_and_service_agents_are_created_and_waited_for_before_anything_else() -> None:
    found = resources(PROJECT)
    assert found["google_project_service.api"]["for_each"] == "${toset(var.activate_apis)}"
    agent = found["google_project_service_identity.agent"]
    assert agent["provider"] in ("google-beta", "${google-beta}"), \
        "google_project_service_identity is in the google-beta provider only"
    assert agent["depends_on"] == ["${google_project_service.api}"]
    agents = blocks(PROJECT, "variable")["service_agents"]["default"]
    assert set(agents) == {"pubsub.googleapis.com", "eventarc.googleapis.com"}
    settle = found["time_sleep.settle"]
    assert "google_project_service.api" in settle["triggers"]["apis"]
    assert "google_project_service_identity.agent" in settle["triggers"]["agents"]
    assert blocks(PROJECT, "output")["ready"]["value"] == "${time_sleep.settle.id}"
    for name, call in blocks(EXAMPLE, "module").items():
        if name == "project_services":
            continue
        if name in NO_DEPENDS_ON:
            assert "depends_on" not in call, name
        else:
            assert "${module.project_services}" in call["depends_on"], name


def test_the_apis_the_agents_belong_to_are_enabled_by_default() -> None:
    apis = blocks(EXAMPLE, "variable")["activate_apis"]["default"]
    agents = blocks(PROJECT, "variable")["service_agents"]["default"]
    assert set(agents) <= set(apis)
    assert {"cloudbuild.googleapis.com", "artifactregistry.googleapis.com",
            "eventarc.googleapis.com", "run.googleapis.com"} <= set(apis)


def test_the_apis_enabled_before_this_module_existed_move_into_it() -> None:
    (moved,) = load_dir(EXAMPLE)["moved"]
    assert moved == {"from": "${google_project_service.api}",
                     "to": "${module.project_services.google_project_service.api}"}
    assert "google_project_service.api" not in resources(EXAMPLE)


def test_both_providers_name_the_project_as_quota_project() -> None:
    providers = {name: body for block in load_dir(EXAMPLE)["provider"]
                 for name, body in block.items()}
    for name in ("google", "google-beta"):
        assert providers[name]["user_project_override"] is True, name
        assert providers[name]["billing_project"] == \
            "${coalesce(var.billing_project, var.project_id)}", name


def test_the_buckets_and_the_image_repository_can_be_applied_on_their_own() -> None:
    # `terraform apply -target=module.buckets` (or artifact_registry) takes the module and
    # what it depends on: the project's APIs, nothing of the rest.
    for name in ("buckets", "artifact_registry"):
        call = example_module(name)
        assert call["depends_on"] == ["${module.project_services}"], name
        references = " ".join(str(value) for key, value in call.items()
                              if key not in ("source", "depends_on", "__comments__"))
        assert "module." not in references, (name, references)
