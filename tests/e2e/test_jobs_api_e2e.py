"""The jobs API on the running sandbox, over HTTP, as its users call it.

The API runs as the sandbox runs every service (gunicorn, its own process, its own
Kubernetes identity under the RBAC the definition renders: a missing rule is a 403
here); callers present ID tokens the sandbox's issuer signed (`accelops sandbox token`),
which the service checks against the issuer's certificates over HTTP. Two teams submit
jobs through it; each member sees and may act on their own team's only; an admin sees
both; a queued job is explained through it; a cancel is refused for another team's job
and removes one's own; a job's log is read through it — using every Kubernetes rule of
the API's identity and no other request —; and the CLI does the same with ``--api``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from sandbox.supervisor.runner import Sandbox
from sandbox.topology import PROJECT
from shared import kube
from shared.config import load_config
from shared.deployment import system
from shared.deployment.access import Probe, allowed_by_definition
from shared.deployment.manifests import identity
from shared.kube import JOBSETS
from tests.e2e.conftest import wait_for

pytestmark = pytest.mark.e2e

SANDBOX_SPEED = 150.0  # a simulated minute every 0.4 s
ALICE = "alice@example.com"  # research (sandbox/config.yaml)
BOB = "bob@example.com"  # inference
OPS = "ops@example.com"  # jobs_api admin
LONG = 36_000  # simulated seconds: the jobs run until cancelled


def request(request_id: str | None, team: str, tpu: str, slices: int = 1,
            run_seconds: int = LONG) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": f"api-{team}", "team": team, "image": "us-docker.pkg.dev/acme/train/llama:1.4",
        "tpu": {"type": tpu, "slices": slices},
        "env": {"ACCELOPS_SANDBOX_RUN_SECONDS": str(run_seconds)}}
    if request_id is not None:
        body["request_id"] = request_id
    return body


class Caller:
    """One identity calling the sandbox's jobs API with a token the sandbox signed."""

    def __init__(self, sandbox: Sandbox, email: str) -> None:
        self.base = sandbox.jobs_api_url
        self.token = sandbox.id_token(email)
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {self.token}"

    def __call__(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self.session.request(method, f"{self.base}{path}", timeout=30, **kwargs)

    def state(self, job_id: str) -> str | None:
        response = self("GET", f"/v1/jobs/{job_id}")
        return response.json()["state"] if response.status_code == 200 else None


@pytest.fixture(scope="module")
def callers(sandbox: Sandbox) -> dict[str, Caller]:
    return {email: Caller(sandbox, email) for email in (ALICE, BOB, OPS)}


def reaches(caller: Caller, job_id: str, *states: str, timeout: float = 60.0) -> str:
    state = wait_for(lambda: (s := caller.state(job_id)) in states and s, timeout=timeout)
    assert state in states, f"{job_id} never reached {states}: {caller.state(job_id)}"
    return str(state)


def cli(sandbox: Sandbox, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ACCELOPS_JOBS_API": sandbox.jobs_api_url, "ACCELOPS_ID_TOKEN": token}
    return subprocess.run([sys.executable, "-m", "shared.cli", "jobs", *args], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def assert_the_api_did_only_what_its_rules_grant_and_used_every_rule(sandbox: Sandbox) -> None:
    """The API's Kubernetes requests so far, from the cluster's access log."""
    spec = next(s for s in system.SERVICES if s.name == "jobs_api")
    user = identity(spec, PROJECT)
    config = load_config(str(sandbox.config))
    lines = [json.loads(line) for line in sandbox.access.access_log.read_text().splitlines()]
    mine = [line for line in lines if line["user"] == user]

    def resource(line: dict[str, Any]) -> str:  # "pods/log" for the log subresource
        return "/".join(filter(None, (line["resource"], line["subresource"])))

    assert mine
    assert [line for line in mine if not line["allowed"]] == []
    for line in mine:
        probe = Probe(line["verb"], line["apiGroup"], resource(line), line["namespace"],
                      line["name"] or "")
        assert allowed_by_definition(spec, probe, config), line
    used = {(line["apiGroup"], resource(line)) for line in mine}
    for rule in spec.kube_rules:
        assert {(rule.api_group, r) for r in rule.resources} & used, rule


def test_a_token_the_sandbox_prints_is_accepted_and_a_call_without_one_is_not(sandbox):
    printed = subprocess.run(
        [sys.executable, "-m", "shared.cli", "sandbox", "token", "--as", ALICE,
         "--state-dir", str(sandbox.state_dir)],
        capture_output=True, text=True, timeout=60, check=False)
    assert printed.returncode == 0, printed.stderr
    token = printed.stdout.strip()

    with_token = requests.get(f"{sandbox.jobs_api_url}/v1/jobs", timeout=30,
                              headers={"Authorization": f"Bearer {token}"})
    without = requests.get(f"{sandbox.jobs_api_url}/v1/jobs", timeout=30)
    elsewhere = requests.get(f"{sandbox.jobs_api_url}/v1/jobs", timeout=30, headers={
        "Authorization": f"Bearer {sandbox.id_token(ALICE, 'https://another.example')}"})

    assert with_token.status_code == 200, with_token.text
    assert without.status_code == 401
    assert elsewhere.status_code == 401


def test_two_teams_submit_list_read_cancel_and_read_logs_each_their_own(sandbox, callers):
    alice, bob, ops = callers[ALICE], callers[BOB], callers[OPS]

    mine = alice("POST", "/v1/jobs", json=request(None, "research", "v5litepod-16"))
    theirs = bob("POST", "/v1/jobs", json=request("bob-train-1", "inference", "v6e-16",
                                                  slices=2))
    refused_submit = alice("POST", "/v1/jobs", json=request(None, "inference", "v6e-8"))

    assert mine.status_code == 202, mine.text
    assert theirs.status_code == 202, theirs.text
    assert refused_submit.status_code == 403
    alice_id = mine.json()["request_id"]
    assert theirs.json()["request_id"] == "bob-train-1"
    reaches(alice, alice_id, "running")
    reaches(bob, "bob-train-1", "running")

    # Each member lists their own team's jobs; the admin lists both.
    listed = {email: {j["request_id"]: j["team"] for j in c("GET", "/v1/jobs").json()["jobs"]}
              for email, c in callers.items()}
    assert listed[ALICE] == {alice_id: "research"}
    assert listed[BOB] == {"bob-train-1": "inference"}
    assert listed[OPS] == {alice_id: "research", "bob-train-1": "inference"}
    assert bob("GET", "/v1/jobs", params={"team": "research"}).status_code == 403

    # Each reads their own job's status, not the other's.
    status = alice("GET", f"/v1/jobs/{alice_id}").json()
    assert (status["team"], status["state"]) == ("research", "running")
    assert status["slice_status"][0]["pods_running"] == 4
    assert bob("GET", f"/v1/jobs/{alice_id}").status_code == 403
    assert bob("GET", "/v1/jobs/bob-train-1").json()["slices"] == 2

    # A second inference job waits: the first holds the team's 32 chips of quota.
    queued = bob("POST", "/v1/jobs", json=request("bob-train-2", "inference", "v6e-8"))
    assert queued.status_code == 202
    reaches(bob, "bob-train-2", "queued")
    waiting = wait_for(lambda: (q := bob("GET", "/v1/jobs/bob-train-2").json().get("queue"))
                       and q.get("message") and q)
    assert waiting, "the queued job's status should name its queue and why it waits"
    assert waiting["cluster_queue"] == "inference-cluster-queue"
    assert waiting["chips_requested"] == 8

    # Logs: one's own job's, through the API.
    log = alice("GET", f"/v1/jobs/{alice_id}/logs", params={"tail_lines": 5})
    assert log.status_code == 200, log.text
    assert log.headers["Content-Type"].startswith("text/plain")
    assert "sandbox runtime: container main started" in log.text
    assert bob("GET", f"/v1/jobs/{alice_id}/logs").status_code == 403

    # Cancel: refused for another team's job, which stays; one's own goes.
    refused = bob("DELETE", f"/v1/jobs/{alice_id}")
    assert refused.status_code == 403
    assert "team research's job" in refused.json()["error"]
    jobset = status["jobset"].split("/")[1]
    client = kube.get_client()
    assert client.find(JOBSETS, jobset, "research") is not None
    cancelled = alice("DELETE", f"/v1/jobs/{alice_id}")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["state"] == "cancelling"
    assert wait_for(lambda: client.find(JOBSETS, jobset, "research") is None)
    assert wait_for(lambda: alice("GET", f"/v1/jobs/{alice_id}").status_code == 404)

    # The admin cancels what is left.
    for job_id in ("bob-train-1", "bob-train-2"):
        assert ops("DELETE", f"/v1/jobs/{job_id}").status_code == 200
    assert wait_for(lambda: ops("GET", "/v1/jobs").json()["jobs"] == [])

    # All of that took every rule of the API's identity, and nothing else.
    assert_the_api_did_only_what_its_rules_grant_and_used_every_rule(sandbox)


def test_the_cli_submits_lists_and_cancels_through_the_api(sandbox, callers, tmp_path: Path):
    bob_token = callers[BOB].token
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request("bob-cli-1", "inference", "v5litepod-4")))

    submitted = cli(sandbox, bob_token, "submit", str(path))
    assert submitted.returncode == 0, submitted.stderr
    assert "request id bob-cli-1" in submitted.stdout
    reaches(callers[BOB], "bob-cli-1", "provisioning", "running")
    listed = cli(sandbox, bob_token, "list", "--json")
    status = cli(sandbox, bob_token, "status", "bob-cli-1")
    refused = cli(sandbox, callers[ALICE].token, "cancel", "bob-cli-1")
    cancelled = cli(sandbox, bob_token, "cancel", "bob-cli-1")

    assert listed.returncode == 0, listed.stderr
    assert [j["request_id"] for j in json.loads(listed.stdout)] == ["bob-cli-1"]
    assert status.returncode == 0, status.stderr
    assert "team        inference" in status.stdout
    assert refused.returncode == 1
    assert "team inference's job" in refused.stderr
    assert cancelled.returncode == 0, cancelled.stderr
    assert wait_for(lambda: callers[BOB]("GET", "/v1/jobs").json()["jobs"] == [])
