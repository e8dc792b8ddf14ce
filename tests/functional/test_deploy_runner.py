"""The deploy runner (shared/deployment/runner.py) carrying out plans with real
processes: order, streamed output under progress lines, the state file that makes
a rerun resume at the step that failed, probes, bounded repeats and timeouts, and
Terraform outputs read from a real `terraform output -json` (a provider-free
configuration with local state: the Google provider cannot be installed here)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shared.deployment.runner import Runner, StepFailedError
from shared.deployment.steps import Join, Output, Plan, Probe, Repeat, Step

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def note(log: Path, text: str) -> tuple[str, ...]:
    """A command that appends ``text`` to ``log`` and says so."""
    return (PY, "-c", f"open({str(log)!r}, 'a').write({text!r} + '\\n'); print('wrote', "
                      f"{text!r})")


def fails(message: str, code: int = 3) -> tuple[str, ...]:
    return (PY, "-c", f"import sys; print({message!r}); sys.exit({code})")


def run(plan: Plan, state: Path, **options: object) -> str:
    out = io.StringIO()
    Runner(ROOT, state, "accelops deploy up --config c --project p", out=out).run(
        plan, **options)  # type: ignore[arg-type]
    return out.getvalue()


def failing_run(plan: Plan, state: Path, **options: object) -> tuple[str, str]:
    out = io.StringIO()
    runner = Runner(ROOT, state, "accelops deploy up --config c --project p", out=out)
    with pytest.raises(StepFailedError) as failed:
        runner.run(plan, **options)  # type: ignore[arg-type]
    return out.getvalue(), failed.value.message


def three_steps(log: Path, second: tuple[str, ...] | None = None) -> Plan:
    return Plan("up", (
        Step("first", "the first thing", note(log, "first")),
        Step("second", "the second thing", second or note(log, "second")),
        Step("third", "the third thing", note(log, "third")),
    ), None, "a test")


def test_steps_run_in_order_their_output_under_a_progress_line(tmp_path):
    log = tmp_path / "log"
    out = run(three_steps(log), tmp_path / "state.json")
    assert log.read_text().split() == ["first", "second", "third"]
    assert "[1/3] first: the first thing" in out
    assert "    wrote first\n" in out
    assert out.index("[2/3] second") < out.index("wrote second") < out.index("[3/3] third")
    assert "accelops deploy up finished: 3 steps" in out
    recorded = json.loads((tmp_path / "state.json").read_text())["completed"]
    assert list(recorded) == ["first", "second", "third"]


def test_a_failed_step_stops_the_run_naming_the_step_its_command_and_how_to_resume(tmp_path):
    log = tmp_path / "log"
    out, message = failing_run(three_steps(log, fails("quota exceeded")), tmp_path / "s.json")
    assert log.read_text().split() == ["first"]
    assert "    quota exceeded" in out
    assert message.startswith("deploy up stopped at step 2/3 second: it exited 3.")
    assert "  command: " in message
    assert "sys.exit(3)" in message
    assert "quota exceeded" in message
    assert ("run `accelops deploy up --config c --project p` again: it resumes at second"
            in message)


def test_a_rerun_resumes_at_the_failed_step_without_running_the_completed_ones(tmp_path):
    log, state = tmp_path / "log", tmp_path / "state.json"
    failing_run(three_steps(log, fails("not yet")), state)
    out = run(three_steps(log), state)
    assert log.read_text().split() == ["first", "second", "third"]
    assert "resuming at step 2/3 second (the steps before it completed)" in out
    assert "[1/3]" not in out
    assert "nothing to do" in run(three_steps(log), state)
    assert log.read_text().split() == ["first", "second", "third"]


def test_a_step_whose_command_changed_since_it_completed_runs_again(tmp_path):
    log, state = tmp_path / "log", tmp_path / "state.json"
    run(three_steps(log), state)
    changed = three_steps(log, note(log, "second, another way"))
    run(changed, state)
    assert log.read_text().splitlines()[3:] == ["second, another way", "third"]


def test_from_starts_at_the_named_step_and_restart_at_the_first(tmp_path):
    log, state = tmp_path / "log", tmp_path / "state.json"
    run(three_steps(log), state)
    run(three_steps(log), state, from_step="third")
    run(three_steps(log), state, restart=True)
    assert log.read_text().split() == ["first", "second", "third", "third",
                                       "first", "second", "third"]


def test_a_step_whose_work_is_done_is_skipped_by_its_probe(tmp_path):
    log, marker = tmp_path / "log", tmp_path / "bucket-exists"
    exists = (PY, "-c", f"import os, sys; sys.exit(0 if os.path.exists({str(marker)!r}) "
                        "else 1)")
    plan = Plan("up", (Step("bucket", "a bucket", note(log, "created"),
                            skip=Probe(exists, "succeeds", "the bucket exists")),), None, "t")
    run(plan, tmp_path / "a.json")
    marker.touch()
    out = run(plan, tmp_path / "b.json")
    assert log.read_text().split() == ["created"]
    assert "skipped: the bucket exists" in out


def test_a_repeated_step_runs_again_while_its_output_says_not_yet(tmp_path):
    counter = tmp_path / "attempts"
    # Answers like kube-apiserver until the third attempt, then admits.
    script = (f"import pathlib, sys; p = pathlib.Path({str(counter)!r}); "
              "n = int(p.read_text()) + 1 if p.exists() else 1; p.write_text(str(n)); "
              "print('Internal error occurred: failed calling webhook \"vjobset.kb.io\"' "
              "if n < 3 else 'jobset admitted (server dry run)'); sys.exit(1 if n < 3 else 0)")
    plan = Plan("up", (Step("webhooks", "webhooks", (PY, "-c", script),
                            repeat=Repeat("failed calling webhook", 5, 0.05, "the webhooks")),),
                None, "t")
    out = run(plan, tmp_path / "state.json")
    assert counter.read_text() == "3"
    assert out.count("waiting for the webhooks: Internal error occurred: failed calling") == 2
    assert "attempt 2/5" in out
    assert "jobset admitted (server dry run)" in out


def test_a_repeated_step_gives_up_after_its_attempts_with_its_hint(tmp_path):
    plan = Plan("up", (Step("webhooks", "webhooks", fails("failed calling webhook x", 1),
                            repeat=Repeat("failed calling webhook", 3, 0.01, "the webhooks",
                                          "open tcp 9443")),), None, "t")
    out, message = failing_run(plan, tmp_path / "state.json")
    assert "attempt 3/3" in out
    assert "still waiting for the webhooks after 3 attempts in 1800s at most. open tcp 9443" \
        in message


def test_a_repeated_step_stops_when_its_time_is_up_whatever_attempts_are_left(tmp_path):
    plan = Plan("up", (Step("webhooks", "webhooks", fails("failed calling webhook x", 1),
                            repeat=Repeat("failed calling webhook", 1000, 0.2, "the webhooks"),
                            timeout_seconds=1),), None, "t")
    out, message = failing_run(plan, tmp_path / "state.json")
    assert "attempt 1/1000" in out
    assert "attempt 100/1000" not in out
    assert "still waiting for the webhooks after " in message
    assert "attempts in 1s at most." in message


def test_an_error_that_is_not_the_awaited_one_ends_the_repeat(tmp_path):
    plan = Plan("up", (Step("webhooks", "webhooks",
                            fails('namespaces "research" not found', 1),
                            repeat=Repeat("failed calling webhook", 3, 0.01, "webhooks")),),
                None, "t")
    out = run(plan, tmp_path / "state.json")
    assert "attempt" not in out
    assert 'namespaces "research" not found' in out


def test_a_step_that_outlives_its_timeout_is_stopped(tmp_path):
    plan = Plan("up", (Step("hangs", "hangs", (PY, "-c", "import time; time.sleep(60)"),
                            timeout_seconds=0.5),), None, "t")
    _, message = failing_run(plan, tmp_path / "state.json")
    assert "stopped at step 1/1 hangs: it did not finish within 0.5s." in message


def test_accelops_in_a_step_is_the_accelops_running_the_plan(tmp_path, monkeypatch):
    # Another accelops first on PATH (an older install, say) is not the one that runs.
    other = tmp_path / "bin"
    other.mkdir()
    (other / "accelops").write_text("#!/bin/sh\necho 'another accelops'\nexit 3\n")
    (other / "accelops").chmod(0o755)
    monkeypatch.setenv("PATH", f"{other}{os.pathsep}{os.environ['PATH']}")
    plan = Plan("up", (Step("catalogue", "the TPU shapes", ("accelops", "catalogue")),),
                None, "t")
    out = run(plan, tmp_path / "state.json")
    assert "v5litepod-16" in out
    assert "another accelops" not in out


@pytest.fixture(scope="module")
def terraform_outputs(tmp_path_factory) -> Path:
    """A provider-free Terraform configuration, applied with local state, whose
    outputs have the shapes of terraform/envs/example's."""
    if shutil.which("terraform") is None:
        pytest.skip("terraform is not installed")
    directory = tmp_path_factory.mktemp("tf")
    (directory / "main.tf").write_text("""
output "image_repository" { value = "us-central1-docker.pkg.dev/acme/accelops" }
output "buckets" { value = { function_source = "acme-accelops-function-source" } }
output "model_uploads" { value = { route = "pubsub", subscriptions = {} } }
""")
    env = {**os.environ, "CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1"}
    for args in (["init", "-input=false"], ["apply", "-input=false", "-auto-approve"]):
        done = subprocess.run(["terraform", f"-chdir={directory}", *args], env=env,
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    return directory


def test_terraform_outputs_are_read_when_the_step_runs(tmp_path, terraform_outputs):
    echo = (PY, "-c", "import sys; print('|'.join(sys.argv[1:]))")
    plan = Plan("up", (
        Step("upload", "upload", (*echo, Join(("gs://", Output("buckets", ("function_source",)),
                                               "/functions/a.zip")),
                                  Output("image_repository", host=True))),
        Step("eventarc", "eventarc", (*echo, Output("model_uploads",
                                                    ("subscriptions", "deploy_model"))),
             optional=True, note="Only on the eventarc route."),
    ), str(terraform_outputs), "t")
    out = run(plan, tmp_path / "state.json")
    assert "gs://acme-accelops-function-source/functions/a.zip|us-central1-docker.pkg.dev" in out
    assert "skipped: terraform output has no model_uploads.subscriptions.deploy_model. " \
           "Only on the eventarc route." in out


def test_a_missing_terraform_output_stops_the_run_saying_which(tmp_path, terraform_outputs):
    plan = Plan("up", (Step("images", "images", ("true", Output("images", ("jobs_api",)))),),
                str(terraform_outputs), "t")
    _, message = failing_run(plan, tmp_path / "state.json")
    assert "it needs terraform output images.jobs_api, which `terraform -chdir=" in message
