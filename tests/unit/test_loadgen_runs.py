"""Run records as the load generator builds them, and where their parameters come from."""

from __future__ import annotations

import json
import subprocess
from argparse import Namespace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from services.loadgen.outbox import RunMessage
from services.loadgen.records import RunInfo, Slos, encode_record
from services.loadgen.revision import REVISION_VARIABLE, loadgen_revision
from services.loadgen.runs import (
    RunParameters,
    asked_parameters,
    build_run_record,
    forwarded_options,
    public_host,
    run_attributes,
    run_parameters,
    run_time_seconds,
)
from shared.metrics.run import KIND_ATTRIBUTE, RUN_KIND, RunRecord

RUN = RunInfo(test_id="20250314-093000-5f2a9c", server="triton", model="toy-lm",
              accelerator="v5litepod-8")
AT = 1_741_944_600.5  # 2025-03-14 09:30:00.5 UTC


def record(phase: Any = "start", **changes: Any) -> dict[str, Any]:
    options = {"host": "http://127.0.0.1:8000", "locust_version": "2.47.0",
               "loadgen_revision": "b28688d", **changes}
    return build_run_record(phase, AT, RUN, RunParameters(16, 4.0, 600.0), **options)


def test_a_run_record_has_exactly_the_fields_of_the_contract_and_validates() -> None:
    built = record()

    assert set(built) == set(RunRecord.model_fields)
    parsed = RunRecord.model_validate(json.loads(encode_record(built)))
    assert (parsed.test_id, parsed.phase) == (RUN.test_id, "start")
    assert parsed.at == datetime(2025, 3, 14, 9, 30, 0, 500_000, tzinfo=UTC)
    assert (parsed.model_name, parsed.server, parsed.accelerator) == (
        "toy-lm", "triton", "v5litepod-8")
    assert (parsed.users, parsed.spawn_rate, parsed.run_time_s) == (16, 4.0, 600.0)
    assert (parsed.locust_version, parsed.loadgen_revision, parsed.host) == (
        "2.47.0", "b28688d", "http://127.0.0.1:8000")


def test_the_start_and_stop_records_differ_only_in_phase_and_time() -> None:
    start, stop = record("start"), build_run_record(
        "stop", AT + 30, RUN, RunParameters(16, 4.0, 600.0), host="http://127.0.0.1:8000",
        locust_version="2.47.0", loadgen_revision="b28688d")

    assert {k for k in start if start[k] != stop[k]} == {"phase", "at"}


def test_unknown_revision_and_unbounded_run_time_are_recorded_as_null() -> None:
    built = build_run_record("stop", AT, RUN, RunParameters(2, 2.0, None), host=None,
                             locust_version="2.47.0", loadgen_revision=None)

    parsed = RunRecord.model_validate(built)
    assert (parsed.run_time_s, parsed.loadgen_revision, parsed.host) == (None, None, None)


def test_a_run_message_is_marked_as_a_run_for_its_test() -> None:
    assert run_attributes(RUN.test_id) == {KIND_ATTRIBUTE: RUN_KIND, "test_id": RUN.test_id}
    assert run_attributes(RUN.test_id) == {"kind": "run", "test_id": RUN.test_id}


@pytest.mark.parametrize(("host", "public"), [
    ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
    ("https://user:s3cret@triton.example.com:8443/base?token=abc#frag",
     "https://triton.example.com:8443/base"),
    ("http://user:p@ss@host/", "http://host/"),
    ("http://[::1]:8000/v2?x=1", "http://[::1]:8000/v2"),
    ("http://host?key=1", "http://host"),
    ("user:pw@host:80/path", "host:80/path"),
    ("  ", None),
    (None, None),
])
def test_the_recorded_host_keeps_no_credentials_query_or_fragment(host: Any,
                                                                   public: str | None) -> None:
    assert public_host(host) == public


def test_a_host_with_credentials_is_never_published() -> None:
    built = record(host="https://alice:hunter2@triton.internal:8000/?api_key=k1#x")

    encoded = encode_record(built).decode()
    assert "alice" not in encoded
    assert "hunter2" not in encoded
    assert "k1" not in encoded
    assert built["host"] == "https://triton.internal:8000/"


@pytest.mark.parametrize(("value", "seconds"), [
    (None, None), (0, None), ("", None), ("nonsense", None), (True, None), (-5, None),
    (90, 90.0), (2.5, 2.5), ("90", 90.0), ("10s", 10.0), ("5m", 300.0), ("1h30m10s", 5410.0),
    (10**9, 604_800.0),
])
def test_run_time_is_read_in_locusts_timespan_syntax(value: Any, seconds: float | None) -> None:
    assert run_time_seconds(value) == seconds


def test_a_local_run_reads_users_spawn_rate_and_run_time_from_locusts_options() -> None:
    options = Namespace(num_users=8, spawn_rate=2.0, run_time=30)

    assert run_parameters(options) == RunParameters(8, 2.0, 30.0)


def test_a_worker_reads_the_masters_forwarded_parameters_not_its_own_defaults() -> None:
    master = Namespace(num_users=40, spawn_rate=10.0, run_time=300, test_id="t1")
    worker = Namespace(num_users=1, spawn_rate=1.0, run_time=None)

    # What Locust does with a spawn message: the options it does not own are copied over.
    vars(worker).update(forwarded_options(asked_parameters(master)))

    assert run_parameters(worker) == RunParameters(40, 10.0, 300.0)


def test_a_master_started_again_from_the_web_ui_forwards_the_new_numbers() -> None:
    master = Namespace(num_users=4, spawn_rate=1.0, run_time=None)
    vars(master).update(forwarded_options(asked_parameters(master)))
    master.num_users, master.run_time = 12, 60  # the web UI's form

    assert forwarded_options(asked_parameters(master)) == {
        "loadgen_run_users": 12, "loadgen_run_spawn_rate": 1.0, "loadgen_run_time": 60.0}


def test_odd_option_values_are_dropped_rather_than_failing_the_record() -> None:
    parameters = run_parameters(Namespace(num_users="many", spawn_rate=float("nan"),
                                          run_time="forever"))

    assert parameters == RunParameters(None, None, None)
    RunRecord.model_validate(build_run_record("start", AT, RUN, parameters, host=None,
                                              locust_version=None, loadgen_revision=None))


def test_the_revision_variable_wins_over_git() -> None:
    assert loadgen_revision({REVISION_VARIABLE: " abc1234 "}) == "abc1234"


def test_without_the_variable_the_revision_is_the_short_commit_of_the_checkout() -> None:
    here = Path(__file__).resolve().parent
    expected = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here,
                              capture_output=True, text=True, check=True).stdout.strip()

    assert loadgen_revision({}) == expected


def test_outside_a_checkout_the_revision_is_unknown_rather_than_an_error(
        tmp_path: Path) -> None:
    assert loadgen_revision({REVISION_VARIABLE: ""}, directory=tmp_path) is None
    assert loadgen_revision({}, directory=tmp_path / "missing") is None


def test_a_run_message_carries_the_encoded_record_for_its_test() -> None:
    message = RunMessage(RUN.test_id, encode_record(record("stop")))

    assert RunRecord.model_validate_json(message.data).phase == "stop"


def test_the_slos_given_with_the_test_travel_in_both_run_records() -> None:
    run = RunInfo(test_id="slo-1", server="triton", model="toy-lm-stream", accelerator="cpu",
                  slos=Slos(ttft_ms=200.0, latency_ms=1500.0))
    parameters = RunParameters(4, 4.0, 60.0)

    for phase in ("start", "stop"):
        parsed = RunRecord.model_validate(json.loads(encode_record(build_run_record(
            phase, AT, run, parameters, host=None, locust_version="2.47.0",
            loadgen_revision=None))))
        assert (parsed.slo_ttft_ms, parsed.slo_tpot_ms, parsed.slo_latency_ms) == (
            200.0, None, 1500.0)


def test_a_run_without_slos_records_them_as_null() -> None:
    built = record()

    assert (built["slo_ttft_ms"], built["slo_tpot_ms"], built["slo_latency_ms"]) == (
        None, None, None)
