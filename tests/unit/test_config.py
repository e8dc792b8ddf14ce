from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from shared.config import Settings, load_config, parse_config
from shared.errors import ConfigError


def test_settings_come_from_the_documented_environment_variables():
    settings = Settings.from_env({
        "ACCELOPS_CONFIG": "gs://b/c.yaml", "ACCELOPS_PROJECT": "p",
        "ACCELOPS_LOCATION": "us-central2-b", "ACCELOPS_CLUSTER": "tpu",
        "KUBECONFIG": "/k", "ACCELOPS_GKE_ENDPOINT": "http://127.0.0.1:1",
    })
    assert settings == Settings("gs://b/c.yaml", "p", "us-central2-b", "tpu", "/k",
                                "http://127.0.0.1:1")


def test_a_missing_setting_is_named_by_its_environment_variable():
    with pytest.raises(ConfigError, match="ACCELOPS_PROJECT, ACCELOPS_CLUSTER"):
        Settings.from_env({"ACCELOPS_LOCATION": "x"}).require("project", "location", "cluster")


def test_topics_have_documented_defaults():
    config = parse_config("teams: {}")
    assert (config.topics.job_requests, config.topics.rejections) == (
        "job-requests", "job-rejections")


def test_a_team_missing_its_queue_is_named_by_its_path():
    with pytest.raises(ConfigError) as caught:
        parse_config("teams:\n  research:\n    namespace: research\n", "cfg.yaml")
    assert caught.value.field == "teams.research.queue"
    assert "cfg.yaml" in caught.value.message


def test_an_unknown_key_is_refused_by_name():
    with pytest.raises(ConfigError) as caught:
        parse_config("teams:\n  r: {namespace: r, queue: q, max_slice: 2}\n")
    assert caught.value.field == "teams.r.max_slice"


def test_an_invalid_namespace_is_refused_with_the_rule():
    with pytest.raises(ConfigError) as caught:
        parse_config("teams:\n  r: {namespace: Research_Team, queue: q}\n")
    assert caught.value.field == "teams.r.namespace"
    assert "valid Kubernetes name" in caught.value.message


def test_yaml_that_does_not_parse_is_a_config_error():
    with pytest.raises(ConfigError, match="not valid YAML"):
        parse_config("teams: [unclosed")


def test_a_missing_config_file_is_a_config_error(tmp_path: Path):
    with pytest.raises(ConfigError, match="cannot be read"):
        load_config(str(tmp_path / "absent.yaml"))


def test_a_changed_config_file_is_read_again(tmp_path: Path):
    path = tmp_path / "c.yaml"
    path.write_text("teams:\n  a: {namespace: a, queue: q}\n")
    assert set(load_config(str(path)).teams) == {"a"}
    path.write_text("teams:\n  b: {namespace: b, queue: q}\n")
    later = time.time() + 5
    os.utime(path, (later, later))
    assert set(load_config(str(path)).teams) == {"b"}


@pytest.mark.parametrize("team", ["ml_research", "Vision", "-edge", "a" * 50])
def test_a_team_name_kubernetes_would_refuse_as_an_object_name_is_refused_by_key(team):
    with pytest.raises(ConfigError) as caught:
        parse_config(f"teams:\n  {team}: {{namespace: ns, queue: q}}\n", "cfg.yaml")
    assert caught.value.field == f"teams.{team}"
    assert "lowercase letters, digits and '-'" in caught.value.message
    assert "at most 49 characters" in caught.value.message


def test_the_longest_team_name_allowed_is_accepted():
    team = "a" * 49
    config = parse_config(f"teams:\n  {team}: {{namespace: ns, queue: q}}\n")
    assert list(config.teams) == [team]
