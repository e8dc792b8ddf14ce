"""The jobs API (services/jobs_api) through its WSGI interface, with every backend a
stand-in over a real socket: tokens signed by the sandbox issuer and checked against
its certificates over HTTP, requests published to Pub/Sub, JobSets in the Kubernetes
API, rejections in BigQuery."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.idtokens import TokenIssuer
from shared.jobspec.request import REQUEST_LIMITS, read_job_request
from shared.kube import JOBSETS
from tests.jobs_api_fixtures import (
    ALICE,
    AUDIENCE,
    BOB,
    NOBODY,
    OPS,
    JobsApiWorld,
    job_request,
    jobs_api_world,
)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory,
          bigquery_endpoint: str) -> Iterator[JobsApiWorld]:
    with jobs_api_world(tmp_path_factory.mktemp("jobs-api"), bigquery_endpoint) as world:
        world.create_job("research", "alice-run-1")
        world.create_job("inference", "bob-run-1")
        yield world


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def error_of(response: Any) -> dict[str, Any]:
    assert response.mimetype == "application/json", response.data[:200]
    body: dict[str, Any] = response.get_json()
    assert isinstance(body["error"], str)
    return body


# ---------------------------------------------------------------------- identity
def test_a_request_without_a_token_is_refused_with_401(world):
    response = world.client.get("/v1/jobs")

    assert response.status_code == 401
    assert "Bearer" in response.headers["WWW-Authenticate"]
    assert "no credentials" in error_of(response)["error"]


def test_a_token_with_a_forged_signature_is_refused_with_401(world):
    # Another key, claiming the issuer's key id: the certificate does not verify it.
    forged = TokenIssuer.generate().mint(ALICE, AUDIENCE, key_id=world.issuer.key_id)

    response = world.client.get("/v1/jobs", headers=bearer(forged))

    assert response.status_code == 401
    assert "signature" in error_of(response)["error"]


def test_a_token_for_another_audience_is_refused_with_401(world):
    response = world.client.get("/v1/jobs", headers=bearer(
        world.token(ALICE, audience="https://another-service.example")))

    assert response.status_code == 401
    assert "audience" in error_of(response)["error"]


def test_an_expired_token_is_refused_with_401(world):
    expired = world.token(ALICE, issued_at=time.time() - 7200, lifetime=3600)

    response = world.client.get("/v1/jobs", headers=bearer(expired))

    assert response.status_code == 401
    assert "expired" in error_of(response)["error"]


@pytest.mark.parametrize(("claims", "says"), [
    ({"issuer": "https://issuer.example"}, "issuer"),
    ({"email_verified": False}, "not verified"),
])
def test_a_token_not_from_google_or_of_an_unverified_email_is_refused_with_401(
        world, claims, says):
    response = world.client.get("/v1/jobs", headers=bearer(world.token(ALICE, **claims)))

    assert response.status_code == 401
    assert says in error_of(response)["error"]


def test_a_malformed_authorization_header_is_refused_with_401(world):
    for header in ("Basic YWxpY2U6c2VjcmV0", "Bearer", "Bearer not-a-jwt", "Bearer " + "x" * 9000):
        response = world.client.get("/v1/jobs", headers={"Authorization": header})
        assert response.status_code == 401, header


def test_an_identity_of_no_team_is_refused_with_403(world):
    response = world.client.get("/v1/jobs", headers=world.headers(NOBODY))

    assert response.status_code == 403
    assert "may act for no team" in error_of(response)["error"]


def test_the_health_check_and_the_api_description_need_no_token(world):
    assert world.client.get("/healthz").status_code == 200
    document = world.client.get("/openapi.json")
    assert document.status_code == 200
    assert document.get_json()["openapi"].startswith("3.1")


# ----------------------------------------------------------------------- submit
def test_a_member_submits_a_request_and_it_is_published_with_a_new_request_id(world):
    response = world.client.post("/v1/jobs", json=job_request("research"),
                                 headers=world.headers(ALICE))

    assert response.status_code == 202, response.get_json()
    body = response.get_json()
    assert body["request_id"].startswith("api-")
    assert body["status_url"] == f"/v1/jobs/{body['request_id']}"
    assert response.headers["Location"] == body["status_url"]
    [message] = world.published()
    # What submit_job will read: the same request, now with the id the API gave it.
    published = read_job_request(message.data)
    assert published.request_id == body["request_id"]
    assert published.model_dump(exclude={"request_id"}) == read_job_request(
        json.dumps(job_request("research")).encode()).model_dump(exclude={"request_id"})
    assert message.attributes["submitted_by"] == ALICE


def test_two_requests_without_ids_get_different_ids(world):
    ids = {world.client.post("/v1/jobs", json=job_request("research"),
                             headers=world.headers(ALICE)).get_json()["request_id"]
           for _ in range(2)}
    world.published()

    assert len(ids) == 2


def test_a_retried_request_with_its_own_id_keeps_it_and_makes_one_jobset(world, app_client):
    body = job_request("inference", request_id="bob-retried-1", name="retried")
    answers = [world.client.post("/v1/jobs", json=body, headers=world.headers(BOB))
               for _ in range(2)]

    assert [a.status_code for a in answers] == [202, 202]
    assert {a.get_json()["request_id"] for a in answers} == {"bob-retried-1"}
    messages = world.published()
    assert len(messages) == 2
    # submit_job receives both deliveries and makes one JobSet of them.
    for message in messages:
        envelope = {"message": {"data": base64.b64encode(message.data).decode(),
                                "messageId": message.message_id,
                                "attributes": dict(message.attributes)},
                    "subscription": "projects/accelops-test/subscriptions/job-requests"}
        assert app_client.post("/", json=envelope).status_code == 200
    made = [j for j in world.kube.list(JOBSETS, "inference")
            if j["metadata"]["annotations"].get("accelops.dev/request-id") == "bob-retried-1"]
    assert len(made) == 1


def test_a_request_for_a_team_the_caller_is_not_in_is_refused_with_403(world):
    response = world.client.post("/v1/jobs", json=job_request("inference"),
                                 headers=world.headers(ALICE))

    assert response.status_code == 403
    assert error_of(response)["field"] == "team"
    assert world.published() == []


def test_an_admin_may_submit_for_any_team(world):
    response = world.client.post("/v1/jobs", json=job_request("inference"),
                                 headers=world.headers(OPS))

    assert response.status_code == 202
    assert len(world.published()) == 1


@pytest.mark.parametrize(("change", "field", "rule"), [
    # The request model refuses it (read_job_request)...
    ({"hostNetwork": True}, "hostNetwork", "unknown field (not allowed)"),
    ({"tpu": {"type": "v5litepod-16", "slices": "2"}}, "tpu.slices",
     "Input should be a valid integer"),
    # ...and the team policy (check_policy), as submit_job would.
    ({"tpu": {"type": "v5litepod-16", "slices": 9}}, "tpu.slices", "must be at most 4"),
    ({"image": "docker.io/evil/miner:1"}, "image",
     "must start with one of the team's image_prefixes"),
])
def test_a_request_submit_job_would_refuse_is_refused_with_400_naming_field_and_rule(
        world, change, field, rule):
    response = world.client.post("/v1/jobs", json=job_request("research", **change),
                                 headers=world.headers(ALICE))

    assert response.status_code == 400
    body = error_of(response)
    assert (body["field"], body["rule"]) == (field, rule)
    assert world.published() == []


def test_a_body_that_is_not_json_is_refused_with_400(world):
    response = world.client.post("/v1/jobs", data=b"name=x", headers=world.headers(ALICE))

    assert response.status_code == 400
    assert "JSON" in error_of(response)["error"]


def test_a_body_over_the_request_limit_is_refused_with_413_before_it_is_read(world):
    body = json.dumps(job_request("research", args=["x" * 4000] * 70)).encode()
    assert len(body) > REQUEST_LIMITS.max_bytes

    response = world.client.post("/v1/jobs", data=body, headers=world.headers(ALICE),
                                 content_type="application/json")

    assert response.status_code == 413
    assert error_of(response)["field"] == "<root>"
    assert world.published() == []


# ------------------------------------------------------------------------- read
def test_a_member_lists_only_the_jobs_of_their_team(world):
    response = world.client.get("/v1/jobs", headers=world.headers(ALICE))

    assert response.status_code == 200
    jobs = response.get_json()["jobs"]
    assert {j["team"] for j in jobs} == {"research"}
    assert "alice-run-1" in {j["request_id"] for j in jobs}


def test_an_admin_lists_every_team_s_jobs_or_one_team_s(world):
    every = world.client.get("/v1/jobs", headers=world.headers(OPS)).get_json()["jobs"]
    one = world.client.get("/v1/jobs?team=inference",
                           headers=world.headers(OPS)).get_json()["jobs"]

    assert {"alice-run-1", "bob-run-1"} <= {j["request_id"] for j in every}
    assert {j["team"] for j in one} == {"inference"}


def test_listing_another_team_s_jobs_is_refused_with_403(world):
    response = world.client.get("/v1/jobs?team=inference", headers=world.headers(ALICE))

    assert response.status_code == 403
    assert error_of(response)["field"] == "team"


def test_listing_an_unknown_team_is_404_for_an_admin(world):
    response = world.client.get("/v1/jobs?team=nope", headers=world.headers(OPS))

    assert response.status_code == 404
    assert error_of(response)["field"] == "team"


def test_a_member_reads_the_status_of_their_team_s_job_by_request_id_or_name(world):
    by_id = world.client.get("/v1/jobs/alice-run-1", headers=world.headers(ALICE))
    jobset = by_id.get_json()["jobset"]
    by_ref = world.client.get(f"/v1/jobs/{jobset}", headers=world.headers(ALICE))

    assert by_id.status_code == 200
    assert by_id.get_json()["team"] == "research"
    assert by_id.get_json()["explanation"]
    assert by_ref.status_code == 200
    assert by_ref.get_json()["request_id"] == "alice-run-1"


def test_the_status_of_another_team_s_job_is_refused_with_403(world):
    response = world.client.get("/v1/jobs/bob-run-1", headers=world.headers(ALICE))

    assert response.status_code == 403
    assert "inference" in error_of(response)["error"]


def test_an_unknown_job_is_404(world):
    response = world.client.get("/v1/jobs/never-submitted", headers=world.headers(ALICE))

    assert response.status_code == 404
    assert "no job" in error_of(response)["error"]


def test_a_rejected_request_s_status_says_why_and_it_cannot_be_cancelled(world):
    world.record_rejection("alice-rejected-1", "research", "tpu.type",
                           "must be in the team's tpu_types")

    status = world.client.get("/v1/jobs/alice-rejected-1", headers=world.headers(ALICE))
    cancel = world.client.delete("/v1/jobs/alice-rejected-1", headers=world.headers(ALICE))
    other = world.client.get("/v1/jobs/alice-rejected-1", headers=world.headers(BOB))

    assert status.status_code == 200
    assert status.get_json()["state"] == "rejected"
    assert status.get_json()["rejection"]["field"] == "tpu.type"
    assert cancel.status_code == 409
    assert other.status_code == 403


# ----------------------------------------------------------------------- cancel
def test_cancelling_another_team_s_job_is_refused_and_the_jobset_stays(world):
    world.create_job("inference", "bob-keep-1", name="keep")

    response = world.client.delete("/v1/jobs/bob-keep-1", headers=world.headers(ALICE))

    assert response.status_code == 403
    assert [j for j in world.kube.list(JOBSETS, "inference")
            if j["metadata"]["annotations"]["accelops.dev/request-id"] == "bob-keep-1"]


def test_a_member_cancels_their_team_s_job_and_its_jobset_is_deleted(world):
    made = world.create_job("research", "alice-cancel-1", name="cancel-me")

    response = world.client.delete("/v1/jobs/alice-cancel-1", headers=world.headers(ALICE))

    assert response.status_code == 200
    assert response.get_json()["request_id"] == "alice-cancel-1"
    assert world.kube.find(JOBSETS, made["metadata"]["name"], "research") is None


# ------------------------------------------------------------------------- logs
def test_the_logs_of_another_team_s_job_are_refused_with_403(world):
    response = world.client.get("/v1/jobs/bob-run-1/logs", headers=world.headers(ALICE))

    assert response.status_code == 403


def test_a_tail_that_is_not_a_positive_count_is_refused_with_400(world):
    for tail in ("0", "-3", "ten", "10001"):
        response = world.client.get(f"/v1/jobs/alice-run-1/logs?tail_lines={tail}",
                                    headers=world.headers(ALICE))
        assert response.status_code == 400, tail
        assert error_of(response)["field"] == "tail_lines"


# ----------------------------------------------------------------------- errors
def test_unknown_paths_and_methods_answer_json_errors(world):
    missing = world.client.get("/v2/nothing", headers=world.headers(ALICE))
    method = world.client.put("/v1/jobs", headers=world.headers(ALICE))

    assert missing.status_code == 404
    assert error_of(missing)
    assert method.status_code == 405
    assert "POST" in method.headers["Allow"]
    assert error_of(method)


def test_an_unreachable_cluster_is_a_503_with_retry_after(world, monkeypatch, tmp_path: Path):
    from sandbox.common.httpserver import free_port
    from shared import kube

    dead = tmp_path / "kubeconfig"
    dead.write_text(Path(__import__("os").environ["KUBECONFIG"]).read_text().replace(
        f":{world.kube_api.port}", f":{free_port()}"))
    monkeypatch.setenv("KUBECONFIG", str(dead))
    kube.reset_client()
    try:
        response = world.client.get("/v1/jobs", headers=world.headers(ALICE))
    finally:
        monkeypatch.undo()
        kube.reset_client()

    assert response.status_code == 503
    assert response.headers["Retry-After"]


# ----------------------------------------------------------------------- client
def test_the_client_submits_and_reads_over_http_with_the_token_it_is_given(world):
    from shared.jobs.api_client import JobsApiClient

    bob = JobsApiClient(world.url, token=world.token(BOB))

    accepted = bob.submit(json.dumps(job_request("inference")).encode())
    listed = bob.list_jobs()
    status = bob.job_status("bob-run-1")
    world.published()

    assert accepted.request_id.startswith("api-")
    assert {job.team for job in listed} == {"inference"}
    assert status.team == "inference"


def test_the_client_turns_error_answers_into_the_errors_they_mean(world):
    from sandbox.common.httpserver import free_port
    from shared.errors import ForbiddenError, NotFoundError, PermanentError, UnavailableError
    from shared.jobs.api_client import JobsApiClient

    alice = JobsApiClient(world.url, token=world.token(ALICE))
    stranger = JobsApiClient(world.url, token="not-a-token")

    with pytest.raises(PermanentError) as refused:
        alice.submit(json.dumps(job_request("research", tpu={"type": "v4-32", "slices": 5}))
                     .encode())
    assert (refused.value.field, refused.value.rule) == ("tpu.slices", "must be at most 4")
    with pytest.raises(ForbiddenError, match="team inference"):
        alice.job_status("bob-run-1")
    with pytest.raises(NotFoundError, match="no job"):
        alice.job_status("never-submitted")
    with pytest.raises(ForbiddenError, match="not authenticated"):
        stranger.list_jobs()
    nowhere = JobsApiClient(f"http://127.0.0.1:{free_port()}", token="x")
    with pytest.raises(UnavailableError):
        nowhere.list_jobs()
