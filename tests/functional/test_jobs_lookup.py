"""The job lookups against a sandbox Kubernetes API over a socket, with jobs written
straight into its store: finding a job by any of its ids, cancelling, logs, and the
number of API requests each lookup makes as the cluster grows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sandbox.kubeapi import KubeApiServer, install_crds, start_kube_api
from shared import kube
from shared.cli import main
from shared.config import Settings
from shared.errors import ForbiddenError, NotFoundError, PermanentError
from shared.jobs.lookup import cancel_job, find_jobset, job_logs, job_status, list_jobs
from tests.job_objects import (
    CONFIG,
    admitted,
    cluster_queue,
    finished,
    jobset,
    local_queue,
    namespaces,
    pods,
    workload,
    write,
)

PENDING = "couldn't assign flavors to pod set slice: insufficient unused quota"


class Ticking:
    """A store clock one second later at every reading: creation times are distinct."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def server() -> Iterator[KubeApiServer]:
    api = start_kube_api(clock=Ticking())
    install_crds(api.store)
    namespaces(api.store, "research", "inference", "accelops-system")
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture
def settings(server: KubeApiServer, tmp_path: Path) -> Iterator[Settings]:
    kube.reset_client()
    yield Settings(config_source=None, project=None, location=None, cluster=None,
                   kubeconfig=str(server.write_kubeconfig(tmp_path / "kubeconfig")),
                   gke_endpoint=None)
    kube.reset_client()


def add_queued(server: KubeApiServer, request_id: str, team: str = "research") -> dict[str, Any]:
    created = write(server.store, jobset(request_id, team=team))
    write(server.store, workload(created, message=PENDING))
    return created


def add_running(server: KubeApiServer, request_id: str, **pod_options: Any) -> dict[str, Any]:
    created = write(server.store, admitted(jobset(request_id), ready=2))
    write(server.store, workload(created, admitted_in="research-cluster-queue"))
    for pod in pods(created, **pod_options):
        write(server.store, pod)
    return created


def requests_made(server: KubeApiServer, call: Any) -> int:
    server.request_log.clear()
    call()
    return len(server.request_log)


def test_a_job_is_found_by_request_id_namespace_and_name_or_a_bare_name(server, settings):
    created = add_running(server, "found-1")
    name = created["metadata"]["name"]
    client = kube.get_client(settings)

    found = [find_jobset(client, ident)["metadata"]["uid"]
             for ident in ("found-1", f"research/{name}", name)]

    assert found == [created["metadata"]["uid"]] * 3
    assert find_jobset(client, "nothing-like-it") is None


def test_a_bare_name_taken_in_two_namespaces_is_refused_listing_both(server, settings):
    first = write(server.store, jobset("twin"))
    other = jobset("twin-2", team="inference")
    other["metadata"]["name"] = first["metadata"]["name"]
    write(server.store, other)

    with pytest.raises(PermanentError, match="several namespaces") as refused:
        find_jobset(kube.get_client(settings), first["metadata"]["name"])

    assert f"inference/{first['metadata']['name']}" in refused.value.message
    assert f"research/{first['metadata']['name']}" in refused.value.message


def test_a_request_id_used_twice_names_the_jobset_created_first(server, settings):
    first = write(server.store, jobset("reused"))
    second = jobset("reused", team="inference")
    second["metadata"]["name"] = "another-name"
    write(server.store, second)

    assert find_jobset(kube.get_client(settings), "reused")["metadata"]["uid"] == \
        first["metadata"]["uid"]


def test_an_unknown_id_without_bigquery_says_where_it_could_not_look(settings):
    with pytest.raises(NotFoundError, match="without ACCELOPS_PROJECT"):
        job_status(settings, CONFIG, "ghost")


def test_cancel_is_refused_for_another_teams_job_and_deletes_the_jobset_of_ones_own(
    server, settings
):
    created = add_running(server, "mine")

    with pytest.raises(ForbiddenError, match="is team research's job; you may cancel jobs "
                                             "of inference only"):
        cancel_job(settings, CONFIG, "mine", teams=frozenset({"inference"}))
    still = server.store.try_get("jobset.x-k8s.io", "jobsets", created["metadata"]["name"],
                                 "research")
    status = cancel_job(settings, CONFIG, "mine", teams=frozenset({"research"}))

    assert still is not None
    assert status.state == "cancelling"
    assert server.store.try_get("jobset.x-k8s.io", "jobsets", created["metadata"]["name"],
                                "research") is None


def test_logs_come_from_the_failed_pod_unless_another_is_named(server, settings):
    created = write(server.store, finished(jobset("logs"), failed=True))
    written = [write(server.store, pod) for pod in pods(created, failed=(1, 0))]
    for pod in written:
        server.store.pod_logs.write(pod["metadata"]["uid"], "main", 0, "2026-11-23T10:00:00Z",
                                    f"hello from {pod['metadata']['name']}\nbye")
    failed, other = written[4]["metadata"]["name"], written[0]["metadata"]["name"]

    assert job_logs(settings, CONFIG, "logs") == f"hello from {failed}\nbye\n"
    assert job_logs(settings, CONFIG, "logs", pod=other, tail_lines=1) == "bye\n"
    with pytest.raises(NotFoundError, match="has no pod 'nope'; its pods: "):
        job_logs(settings, CONFIG, "logs", pod="nope")


@pytest.mark.parametrize("lookup", ["list", "status of a queued job", "status of a running job"])
def test_a_lookup_makes_as_many_api_requests_for_thirty_jobs_as_for_three(
    server, settings, lookup
):
    write(server.store, cluster_queue("research-cluster-queue", 64))
    write(server.store, local_queue("research", "research-queue", "research-cluster-queue"))
    counts = []
    for size in (3, 30):
        for i in range(len(counts) * 3, size):
            (add_queued if i % 2 else add_running)(server, f"job-{size}-{i}")
        add_queued(server, f"queued-{size}")
        add_running(server, f"running-{size}")
        call = {"list": lambda: list_jobs(settings, CONFIG),
                "status of a queued job": lambda s=size: job_status(settings, CONFIG,
                                                                    f"queued-{s}"),
                "status of a running job": lambda s=size: job_status(settings, CONFIG,
                                                                     f"running-{s}")}[lookup]
        counts.append(requests_made(server, call))

    assert counts[0] == counts[1]
    assert counts[0] <= 5


@pytest.fixture
def cli_env(server, settings, tmp_path, monkeypatch) -> None:
    """The environment `accelops jobs` reads: the kubeconfig and a config file."""
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.model_dump_json())
    monkeypatch.setenv("KUBECONFIG", str(settings.kubeconfig))
    monkeypatch.setenv("ACCELOPS_CONFIG", str(config))
    for name in ("ACCELOPS_PROJECT", "ACCELOPS_LOCATION", "ACCELOPS_CLUSTER",
                 "ACCELOPS_GKE_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)


def test_the_cli_lists_as_json_and_explains_in_text(server, cli_env, capsys):
    add_queued(server, "cli-queued")
    add_running(server, "cli-running")

    assert main(["jobs", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert main(["jobs", "status", "cli-running"]) == 0
    text = capsys.readouterr().out

    assert [(j["request_id"], j["state"]) for j in listed] == [
        ("cli-queued", "queued"), ("cli-running", "running")]
    assert "state       running" in text
    assert "Running: 2 of 2 slice(s), 8 of 8 pods running." in text
    assert "(GKE's node pools are not read: ACCELOPS_PROJECT" in text


def test_the_cli_says_in_one_line_when_a_job_is_unknown(cli_env, capsys):
    assert main(["jobs", "status", "ghost"]) == 1
    assert capsys.readouterr().err.startswith("accelops: error: no job 'ghost' on the cluster")
