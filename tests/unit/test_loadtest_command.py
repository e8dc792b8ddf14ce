"""`accelops loadtest`'s Locust command lines: one process, or a master and its workers
that all stamp the same test id and talk over 127.0.0.1 only."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from sandbox.demos.loadtest import LoadTest
from shared.deployment.loadtest_cli import _at_least_one

TEST = LoadTest(test_id="lt-1", host="http://127.0.0.1:8000", users=8, duration_s=30,
                workers=4, plugin_options=("--until-requests", "9"))


def value(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def test_the_master_and_every_worker_get_the_same_test_id_target_and_plugin_options():
    master = TEST.command(Path("/tmp/run"), master_port=5557)
    worker = TEST.worker_command(5557)

    shared_flags = ("--test-id", "--host", "--server", "--model", "--accelerator",
                    "--max-tokens", "--bad-request-ratio", "--until-requests")
    assert [value(master, f) for f in shared_flags] == [value(worker, f) for f in shared_flags]
    assert value(master, "--test-id") == "lt-1"


def test_the_master_binds_loopback_waits_for_its_workers_and_holds_the_run_parameters():
    master = TEST.command(Path("/tmp/run"), master_port=5557)
    worker = TEST.worker_command(5557)

    assert "--master" in master
    assert "--headless" in master
    assert (value(master, "--master-bind-host"), value(master, "--master-bind-port")) == (
        "127.0.0.1", "5557")
    assert value(master, "--expect-workers") == "4"
    assert (value(master, "-u"), value(master, "-r"), value(master, "-t")) == ("8", "8", "30s")
    assert (value(worker, "--master-host"), value(worker, "--master-port")) == (
        "127.0.0.1", "5557")
    # Users, spawn rate and run time come from the master, never a worker's own flags.
    assert not {"-u", "-r", "-t", "--headless", "--json-file"} & set(worker)


def test_a_single_process_run_has_no_master_or_worker_flags():
    single = LoadTest(test_id="lt-1", host="http://h:1").command(Path("/tmp/run"))

    assert not {"--master", "--worker", "--expect-workers"} & set(single)
    assert value(single, "--json-file") == "/tmp/run"


@pytest.mark.parametrize("text", ["0", "-2", "two"])
def test_workers_below_one_or_not_a_number_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match=text):
        _at_least_one(text)


def test_a_negative_worker_count_is_not_a_load_test():
    with pytest.raises(ValueError, match="workers"):
        LoadTest(test_id="lt-1", host="http://h:1", workers=-1)
