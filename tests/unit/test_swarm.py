"""The load generator's web API in the master's terms: the /swarm form, the service
proxy name RBAC sees, the parsing of /stats/requests (shared.deployment.swarm)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.deployment.swarm import MASTER_WEB, SwarmTest, master_stats, swarm_form, swarm_refusal

TEST = SwarmTest(test_id="lt-1", host="http://10.0.0.9:80", model="toy-lm", users=6,
                 duration_s=12, slos=(("slo_latency_ms", 250.0),))


def test_the_form_carries_locusts_fields_and_the_load_generators_options_by_name() -> None:
    form = dict(swarm_form(TEST))

    assert form == {"user_count": "6", "spawn_rate": "6", "host": "http://10.0.0.9:80",
                    "run_time": "12s", "test_id": "lt-1", "model": "toy-lm",
                    "server": "triton", "accelerator": "cpu", "max_tokens": "16",
                    "bad_request_ratio": "0", "stream": "false", "slo_latency_ms": "250"}


def test_a_streamed_test_says_true_the_way_the_masters_form_reads_a_flag() -> None:
    form = dict(swarm_form(SwarmTest(test_id="t", host="h", model="m", stream=True,
                                     spawn_rate=0.5)))

    assert form["stream"] == "true"
    assert form["spawn_rate"] == "0.5"


def test_the_proxy_name_carries_the_web_port_as_rbac_matches_it() -> None:
    assert MASTER_WEB == "locust-master:8089"


@pytest.mark.parametrize("kwargs", [{"users": 0}, {"duration_s": 0}])
def test_a_test_without_users_or_time_is_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        SwarmTest(test_id="t", host="h", model="m", **kwargs)


def test_a_refused_swarm_gives_the_masters_reason() -> None:
    assert swarm_refusal({"success": True, "message": "Swarming started"}) is None
    assert swarm_refusal({"success": False, "message": "loadgen: --model: name the model"}) \
        == "loadgen: --model: name the model"
    assert swarm_refusal("<html>") == "unexpected answer '<html>'"


def test_stats_read_the_aggregated_row_and_the_workers_by_state() -> None:
    answer = {"state": "stopped", "user_count": 0, "worker_count": 3,
              "workers": [{"id": "a_1", "state": "ready"}, {"id": "b_2", "state": "ready"},
                          {"id": "c_3", "state": "missing"}],
              "stats": [{"name": "/v2/models/toy-lm/infer", "num_requests": 7},
                        {"name": "Aggregated", "num_requests": 9, "num_failures": 1,
                         "median_response_time": 14, "response_time_percentile_0.99": 41}]}

    stats = master_stats(answer)

    assert stats.state == "stopped"
    assert stats.connected() == 2
    assert stats.workers == {"a_1": "ready", "b_2": "ready", "c_3": "missing"}
    assert stats.aggregate.requests == 9
    assert stats.aggregate.failures == 1
    # /stats/requests has no 90th percentile: nothing is compared for it.
    assert stats.aggregate.percentiles == {"p50": 14.0, "p90": None, "p99": 41.0}


def test_stats_of_a_master_that_counted_nothing_have_no_percentiles() -> None:
    stats = master_stats({"state": "ready", "stats": [
        {"name": "Aggregated", "num_requests": 0, "num_failures": 0,
         "median_response_time": 0, "response_time_percentile_0.99": 0}]})

    assert stats.aggregate.percentiles == {"p50": None, "p90": None, "p99": None}
    assert stats.connected() == 0


def test_an_answer_without_a_state_is_not_a_masters() -> None:
    with pytest.raises(KeyError):
        master_stats({"stats": []})
