"""The accelops command line, run in process as a user would call it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sandbox.pubsub import SubscriptionConfig
from shared.cli import main
from shared.jobspec.tpu import catalogue
from tests.functional.conftest import REPO, job_request
from tests.jobs_fixtures import CONFIG

REQUEST = REPO / "sandbox" / "requests" / "llama-multislice.json"


def test_catalogue_prints_every_tpu_shape(capsys):
    assert main(["catalogue"]) == 0
    out = capsys.readouterr().out
    for shape in catalogue():
        assert shape.type in out
    [row] = [line.split() for line in out.splitlines() if line.startswith("v5litepod-16 ")]
    assert row == ["v5litepod-16", "tpu-v5-lite-podslice", "4x4", "ct5lp-hightpu-4t", "4", "4",
                   "16"]


def test_catalogue_json_matches_the_catalogue(capsys):
    assert main(["catalogue", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["type"] for r in rows] == [s.type for s in catalogue()]


def test_render_prints_the_jobset_yaml_and_publishes_nothing(capsys, monkeypatch):
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)
    assert main(["jobs", "render", str(REQUEST), "--config", str(CONFIG)]) == 0
    jobset = yaml.safe_load(capsys.readouterr().out)
    assert jobset["kind"] == "JobSet"
    assert jobset["metadata"]["annotations"]["accelops.dev/request-id"] == (
        "llama-pretrain-2026-11-21")
    assert jobset["spec"]["replicatedJobs"][0]["replicas"] == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("{not json", "is not JSON: Expecting property name"),
        (json.dumps({**job_request(), "tpu": {"type": "v5litepod-16", "slices": 9}}),
         "[tpu.slices]"),
        (json.dumps({**job_request(), "hostNetwork": True}), "hostNetwork: unknown field"),
    ],
)
def test_render_explains_a_bad_file_in_one_line(capsys, tmp_path: Path, content, message):
    path = tmp_path / "request.json"
    if content is not None:
        path.write_text(content)

    assert main(["jobs", "render", str(path), "--config", str(CONFIG)]) == 1
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_render_without_a_configuration_says_how_to_give_one(capsys, monkeypatch):
    monkeypatch.delenv("ACCELOPS_CONFIG", raising=False)
    assert main(["jobs", "render", str(REQUEST)]) == 1
    assert "--config FILE or set ACCELOPS_CONFIG" in capsys.readouterr().err


def test_submit_refuses_an_invalid_file_before_publishing(capsys, tmp_path: Path):
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"name": "x"}))
    assert main(["jobs", "submit", str(path), "--project", "p"]) == 1
    assert "team: Field required" in capsys.readouterr().err


def test_submit_without_a_project_says_how_to_give_one(capsys, monkeypatch):
    monkeypatch.delenv("ACCELOPS_PROJECT", raising=False)
    assert main(["jobs", "submit", str(REQUEST)]) == 1
    assert "--project or set ACCELOPS_PROJECT" in capsys.readouterr().err


def test_submit_publishes_the_file_unchanged(capsys, cluster, pubsub_api):
    topic = "projects/accelops-test/topics/job-requests"
    pubsub_api.broker.create_topic(topic)
    pubsub_api.broker.create_subscription(
        SubscriptionConfig(name="projects/accelops-test/subscriptions/audit", topic=topic))

    assert main(["jobs", "submit", str(REQUEST)]) == 0
    assert "message id" in capsys.readouterr().out
    [delivery] = pubsub_api.broker.pull("projects/accelops-test/subscriptions/audit", 10,
                                        timeout=2)
    assert delivery.message.data == REQUEST.read_bytes()
