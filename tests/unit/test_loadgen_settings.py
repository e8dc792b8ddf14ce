"""Load generator options: flags, environment variables and the rules they must follow."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import configargparse
import pytest

from services.loadgen.records import Slos
from services.loadgen.settings import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_FLUSH_INTERVAL,
    DEFAULT_TOPIC,
    Settings,
    add_arguments,
    new_test_id,
    settings_from,
)
from shared.errors import ConfigError
from shared.metrics.record import MetricRecord


def parse(args: list[str], env: dict[str, str] | None = None) -> Any:
    """Parse as Locust does: ConfigArgParse reads flags, then LOADGEN_* variables."""
    environ = env or {}
    parser = configargparse.ArgumentParser()
    add_arguments(parser, environ=environ)
    return parser.parse_args(args, env_vars=environ)


def settings(*args: str, env: dict[str, str] | None = None) -> Settings:
    return settings_from(parse(["--model", "toy-lm", "--metrics-project", "p1", *args], env),
                         new_id=lambda: "generated-id")


def test_defaults_give_a_triton_run_with_batched_metrics() -> None:
    result = settings()

    assert (result.server, result.model, result.metrics_topic) == ("triton", "toy-lm",
                                                                   DEFAULT_TOPIC)
    assert (result.metrics_batch_size, result.metrics_flush_interval) == (
        DEFAULT_BATCH_SIZE, DEFAULT_FLUSH_INTERVAL)
    assert (result.test_id, result.accelerator, result.bad_request_ratio) == (
        "generated-id", None, 0.0)


def test_every_option_can_come_from_a_loadgen_environment_variable() -> None:
    env = {"LOADGEN_SERVER": "saxml", "LOADGEN_MODEL": "/sax/test/lm",
           "LOADGEN_ACCELERATOR": "v5litepod-8", "LOADGEN_TEST_ID": "run-7",
           "LOADGEN_MAX_TOKENS": "64", "LOADGEN_BAD_REQUEST_RATIO": "0.25",
           "LOADGEN_METRICS_PROJECT": "proj-a", "LOADGEN_METRICS_TOPIC": "lt-metrics",
           "LOADGEN_METRICS_BATCH_SIZE": "50", "LOADGEN_METRICS_FLUSH_INTERVAL": "0.5",
           "LOADGEN_METRICS_PUBLISH_TIMEOUT": "5", "LOADGEN_PROMPTS_FILE": "/p.txt"}

    result = settings_from(parse([], env))

    assert result == Settings(
        test_id="run-7", server="saxml", model="/sax/test/lm", accelerator="v5litepod-8",
        max_tokens=64, prompts_file="/p.txt", bad_request_ratio=0.25, stream=False,
        metrics_project="proj-a", metrics_topic="lt-metrics", metrics_batch_size=50,
        metrics_flush_interval=0.5, metrics_publish_timeout=5.0)


def test_streaming_is_off_unless_asked_for_by_flag_or_variable() -> None:
    assert not settings().stream
    assert settings("--stream").stream
    assert settings(env={"LOADGEN_STREAM": "true"}).stream
    assert not settings(env={"LOADGEN_STREAM": "false"}).stream


def test_streaming_a_saxml_run_is_refused_because_the_proxy_cannot_stream() -> None:
    with pytest.raises(ConfigError, match="--stream") as raised:
        settings("--server", "saxml", "--stream")

    assert raised.value.field == "--stream"


def test_a_flag_wins_over_its_environment_variable() -> None:
    result = settings("--metrics-batch-size", "7", env={"LOADGEN_METRICS_BATCH_SIZE": "50"})

    assert result.metrics_batch_size == 7


@pytest.mark.parametrize(("env", "project"), [
    ({"GOOGLE_CLOUD_PROJECT": "gcp-proj", "ACCELOPS_PROJECT": "acc-proj"}, "gcp-proj"),
    ({"ACCELOPS_PROJECT": "acc-proj"}, "acc-proj"),
])
def test_the_metrics_project_defaults_to_the_environments_project(env: dict[str, str],
                                                                    project: str) -> None:
    result = settings_from(parse(["--model", "m1"], env))

    assert result.metrics_project == project


def test_a_generated_test_id_sorts_by_start_time_and_is_a_valid_record_test_id() -> None:
    test_id = new_test_id(datetime(2025, 3, 14, 9, 30, tzinfo=UTC))

    assert test_id.startswith("20250314-093000-")
    assert len(test_id) == len("20250314-093000-") + 6
    assert new_test_id() != new_test_id()
    MetricRecord.model_validate({"test_id": test_id, "request_type": "POST",
                                 "request_name": "/", "response_time": 1.0,
                                 "start_time": 1.8e9})


@pytest.mark.parametrize(("args", "flag"), [
    (["--test-id", "has space"], "--test-id"),
    (["--max-tokens", "0"], "--max-tokens"),
    (["--bad-request-ratio", "1.5"], "--bad-request-ratio"),
    (["--bad-request-ratio", "nan"], "--bad-request-ratio"),
    (["--metrics-topic", "x"], "--metrics-topic"),
    (["--metrics-batch-size", "0"], "--metrics-batch-size"),
    (["--metrics-flush-interval", "0"], "--metrics-flush-interval"),
    (["--metrics-publish-timeout", "-1"], "--metrics-publish-timeout"),
    (["--model", " "], "--model"),
])
def test_an_invalid_option_is_refused_with_its_flag_named(args: list[str], flag: str) -> None:
    with pytest.raises(ConfigError) as raised:
        settings(*args)

    assert raised.value.field == flag
    assert str(raised.value).startswith(flag)


def test_a_run_without_a_project_for_its_metrics_is_refused() -> None:
    with pytest.raises(ConfigError, match="--metrics-project"):
        settings_from(parse(["--model", "m1"], {}))


def test_an_unknown_server_is_refused_by_the_parser() -> None:
    with pytest.raises(SystemExit):
        parse(["--server", "vllm"])


# ------------------------------------------------------------------ SLOs
def test_slos_are_read_from_flags_or_the_environment_and_are_unset_by_default() -> None:
    assert settings().slos == Slos()

    result = settings("--stream", "--slo-ttft-ms", "250", "--slo-tpot-ms", "40",
                      env={"LOADGEN_SLO_LATENCY_MS": "2000"})

    assert result.slos == Slos(ttft_ms=250.0, tpot_ms=40.0, latency_ms=2000.0)


@pytest.mark.parametrize("flag", ["--slo-ttft-ms", "--slo-tpot-ms"])
def test_a_token_slo_without_streaming_is_refused(flag: str) -> None:
    with pytest.raises(ConfigError, match=f"^{flag}: only streamed requests"):
        settings(flag, "100")


def test_a_latency_slo_needs_no_streaming() -> None:
    assert settings("--slo-latency-ms", "500").slos.latency_ms == 500.0


@pytest.mark.parametrize("value", ["0", "-5", "nan", "86400001"])
def test_an_slo_must_be_a_positive_number_of_ms_at_most_a_day(value: str) -> None:
    with pytest.raises(ConfigError, match=r"^--slo-latency-ms: .* must be above 0"):
        settings("--slo-latency-ms", value)


def test_an_slo_left_empty_in_the_web_uis_form_is_no_slo() -> None:
    # Locust's /swarm stores a form field of an option without a default as posted.
    options = parse(["--model", "toy-lm", "--metrics-project", "p1", "--stream"])
    options.slo_ttft_ms, options.slo_tpot_ms = "", "35"

    assert settings_from(options).slos == Slos(ttft_ms=None, tpot_ms=35.0)
def test_a_process_that_learns_the_model_with_each_test_may_start_without_one() -> None:
    # A worker, or a master waiting for POST /swarm: the model comes with the test.
    options = parse(["--metrics-project", "p1"], {})

    assert settings_from(options, model_required=False).model == ""
    with pytest.raises(ConfigError) as refused:
        settings_from(options)
    assert refused.value.field == "--model"
