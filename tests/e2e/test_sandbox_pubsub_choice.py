"""``accelops sandbox up --pubsub emulator|standin``: the sandbox on either Pub/Sub.

The choice is recorded in the sandbox's state, so ``status`` says which Pub/Sub
runs; ``env`` has the same shape either way (PUBSUB_EMULATOR_HOST is all a client
needs). ``ACCELOPS_SANDBOX_PUBSUB`` is the default, so the e2e suite can run on
Google's emulator (``make test-emulator``).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
from google.cloud import pubsub_v1  # type: ignore[attr-defined,unused-ignore]

from sandbox.supervisor.cli import main
from sandbox.supervisor.runner import Sandbox, SandboxError
from sandbox.topology import PROJECT
from shared.cli import build_parser
from tests.e2e.pubsub_fixtures import emulator_or_skip

pytestmark = pytest.mark.e2e


def _sandbox_command(action: str, state_dir: Path, pubsub: str | None = None) -> int:
    return main(argparse.Namespace(action=action, state_dir=str(state_dir), speed=60.0,
                                   foreground=False, pubsub=pubsub, start_timeout=None))


def _exports(text: str) -> dict[str, str]:
    return dict(re.findall(r"^export (\w+)=(.*)$", text, flags=re.MULTILINE))


def test_sandbox_up_with_pubsub_emulator_runs_googles_emulator_and_status_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    emulator_or_skip()
    state_dir = tmp_path / "sandbox"
    assert _sandbox_command("up", state_dir, pubsub="emulator") == 0
    try:
        up = capsys.readouterr().out
        assert _sandbox_command("status", state_dir) == 0
        status = capsys.readouterr().out
        assert _sandbox_command("env", state_dir) == 0
        env = _exports(capsys.readouterr().out)

        assert re.search(r"^pubsub: Google Pub/Sub emulator \d+\.\d+\.\d+$", status, re.M)
        assert "Google Pub/Sub emulator" in up
        state = json.loads((state_dir / "state.json").read_text())
        assert state["pubsub"]["command"][0].endswith("cloud-pubsub-emulator")
        assert re.fullmatch(r"127\.0\.0\.1:\d+", env["PUBSUB_EMULATOR_HOST"])
        # Provisioned like the stand-in: the sandbox's topics exist on the emulator.
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("PUBSUB_EMULATOR_HOST", env["PUBSUB_EMULATOR_HOST"])
            publisher = pubsub_v1.PublisherClient()
            try:
                topics = list(publisher.list_topics(project=f"projects/{PROJECT}"))
            finally:
                publisher.stop()
        assert topics
    finally:
        assert _sandbox_command("down", state_dir) == 0
    assert not (state_dir / "state.json").exists()


def test_the_stand_in_is_the_default_and_both_give_env_the_same_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ACCELOPS_SANDBOX_PUBSUB", raising=False)
    state_dir = tmp_path / "sandbox"
    sandbox = Sandbox(state_dir, parts={"reports"}).start(progress=False)
    try:
        assert _sandbox_command("status", state_dir) == 0
        status = capsys.readouterr().out
        assert _sandbox_command("env", state_dir) == 0
        env = _exports(capsys.readouterr().out)
    finally:
        sandbox.stop()

    assert sandbox.pubsub == "standin"
    assert "pubsub: accelops stand-in\n" in status
    assert set(env) == set(sandbox.env())
    assert re.fullmatch(r"127\.0\.0\.1:\d+", env["PUBSUB_EMULATOR_HOST"])


def test_accelops_sandbox_pubsub_sets_the_default_and_an_unknown_value_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACCELOPS_SANDBOX_PUBSUB", "emulator")
    assert Sandbox(tmp_path).pubsub == "emulator"
    assert Sandbox(tmp_path, pubsub="standin").pubsub == "standin"

    monkeypatch.setenv("ACCELOPS_SANDBOX_PUBSUB", "fake")
    with pytest.raises(SandboxError, match="ACCELOPS_SANDBOX_PUBSUB must be one of "
                                           "standin, emulator, not 'fake'"):
        Sandbox(tmp_path)


def test_the_cli_takes_pubsub_standin_or_emulator_and_leaves_the_default_to_the_runner() -> None:
    parser = build_parser()

    assert parser.parse_args(["sandbox", "up", "--pubsub", "emulator"]).pubsub == "emulator"
    assert parser.parse_args(["sandbox", "up"]).pubsub is None
    with pytest.raises(SystemExit):
        parser.parse_args(["sandbox", "up", "--pubsub", "kafka"])


def test_a_sandbox_started_before_the_choice_existed_reports_the_stand_in(
    tmp_path: Path,
) -> None:
    # A state file written before components had ``about``.
    (tmp_path / "state.json").write_text(json.dumps({"pubsub": {
        "name": "pubsub", "port": 1, "command": ["python", "-m", "sandbox.pubsub"],
        "log": str(tmp_path / "pubsub.log"), "pid": 0, "env": {}, "ports": {}}}))

    attached = Sandbox.attach(tmp_path)

    assert attached.pubsub == "standin"
    assert attached.pubsub_description == "accelops stand-in"
