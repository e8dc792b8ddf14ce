"""A deployment mistake never rejects valid work: submit_job answers 5xx (Pub/Sub
retries, then dead-letters) with an ERROR log naming what is missing, publishes no
rejection and creates nothing — through the entry point, against the stand-ins."""

from __future__ import annotations

import logging

import pytest

from shared import kube
from tests.functional.conftest import jobsets, load_event, pull_rejections


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]


def test_without_location_cluster_or_kubeconfig_a_valid_request_is_retried_not_rejected(
    app_client, cluster, monkeypatch, caplog
):
    caplog.set_level(logging.INFO, logger="accelops")
    monkeypatch.delenv("KUBECONFIG")
    for name in ("ACCELOPS_LOCATION", "ACCELOPS_CLUSTER"):
        monkeypatch.delenv(name, raising=False)
    kube.reset_client()

    response = app_client.post("/", json=load_event("pubsub_push_job_request.json"))

    assert response.status_code == 500
    [error] = _errors(caplog)
    assert "ACCELOPS_LOCATION, ACCELOPS_CLUSTER must be set" in error
    assert "will retry" in error
    assert pull_rejections() == []


def test_an_unusable_kubeconfig_is_retried_with_an_error_naming_it(
    app_client, cluster, monkeypatch, tmp_path, caplog
):
    caplog.set_level(logging.INFO, logger="accelops")
    broken = tmp_path / "broken-kubeconfig"
    broken.write_text("clusters: [")
    monkeypatch.setenv("KUBECONFIG", str(broken))
    kube.reset_client()

    response = app_client.post("/", json=load_event("pubsub_push_job_request.json"))

    assert response.status_code == 500
    [error] = _errors(caplog)
    assert f"KUBECONFIG {broken} is unusable" in error
    assert pull_rejections() == []


@pytest.mark.parametrize("code", [401, 403])
def test_a_permission_the_function_lacks_is_retried_as_a_deployment_error(
    app_client, cluster, kube_api, caplog, code
):
    caplog.set_level(logging.INFO, logger="accelops")
    kube_api.faults.fail_next(10, code=code)

    response = app_client.post("/", json=load_event("pubsub_push_job_request.json"))
    kube_api.faults.clear()

    assert response.status_code == 500
    [error] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert error.fields["error"] == "PermissionDeniedError"
    assert f"jobsets: {code}" in error.getMessage()
    assert pull_rejections() == []
    assert jobsets(cluster) == []


def test_without_a_project_an_invalid_request_is_retried_until_its_rejection_can_be_recorded(
    app_client, cluster, monkeypatch, caplog
):
    caplog.set_level(logging.INFO, logger="accelops")
    monkeypatch.delenv("ACCELOPS_PROJECT")
    event = load_event("pubsub_push_job_request.json")
    event["message"]["data"] = "bm90IGpzb24="  # "not json"

    response = app_client.post("/", json=event)

    assert response.status_code == 500
    assert any("ACCELOPS_PROJECT must be set" in line for line in _errors(caplog))


def test_without_the_jobset_crd_a_valid_request_is_retried_not_rejected(
    app_client, cluster, kube_api, caplog
):
    # Before manifests/controllers is applied, kube-apiserver serves no jobsets path:
    # it answers Go's plain-text "404 page not found", not a Status about an object.
    caplog.set_level(logging.INFO, logger="accelops")
    kube_api.store.delete("apiextensions.k8s.io", "customresourcedefinitions",
                          "jobsets.jobset.x-k8s.io")

    response = app_client.post("/", json=load_event("pubsub_push_job_request.json"))

    assert response.status_code == 500
    [error] = _errors(caplog)
    assert "is its CRD installed?" in error
    assert "will retry" in error
    assert pull_rejections() == []
