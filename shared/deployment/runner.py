"""Carry out a deployment plan (``shared/deployment/steps.py``): each step a process
of its own, its output streamed as it comes, in order, stopping at the first failure.

A run records every completed step (with its fingerprint) in a state file, written
after each step, so running the same command again resumes at the step that
failed; ``--from STEP`` and ``--restart`` override that. Terraform outputs a step
names are read with ``terraform output -json`` when the step is about to run (again
after every Terraform step). ``accelops`` in a step is this interpreter running
``shared.cli``, so a step runs the same accelops as the command that started it.

Every wait is bounded: each process has a timeout, and a repeated step a number of
attempts.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from shared.deployment.steps import (
    Arg,
    Join,
    Output,
    Plan,
    Step,
    command_line,
    fingerprint,
    start_index,
)
from shared.errors import AccelopsError

__all__ = ["Runner", "StepFailedError"]

PROBE_TIMEOUT = 120.0
# Kept of a step's output for its failure message and a repeat's pattern.
KEPT_OUTPUT = 64 * 1024


class StepFailedError(AccelopsError):
    """A step failed; the message names it, its command and how to go on."""


class _MissingOutputError(Exception):
    def __init__(self, output: Output) -> None:
        super().__init__(output.label)
        self.output = output


@dataclass(slots=True)
class _Finished:
    code: int
    output: str
    timed_out: bool = False


@dataclass
class Runner:
    """Runs plans from the repository root ``root``, printing to ``out``."""

    root: Path
    state_path: Path
    # The command that reruns this one (said when a step fails).
    rerun: str
    out: TextIO = field(default_factory=lambda: sys.stdout)
    _outputs: dict[str, Any] | None = None

    # ------------------------------------------------------------------ the run
    def run(self, plan: Plan, *, from_step: str | None = None, restart: bool = False) -> None:
        """Run the plan from where it should start. Raises StepFailedError."""
        state = {} if restart else self._load()
        completed = {name: e["fingerprint"] for name, e in state.items()}
        first = start_index(plan, completed, from_step=from_step, restart=restart)
        total = len(plan.steps)
        self._say(f"accelops deploy {plan.command}: {total} steps ({plan.target}); "
                  f"progress is recorded in {self.state_path}")
        if first == total:
            self._say("every step has completed: nothing to do (--restart runs them all "
                      "again, --from STEP from that one)")
            return
        if first > 0:
            why = f"--from {from_step}" if from_step else "the steps before it completed"
            self._say(f"resuming at step {first + 1}/{total} {plan.steps[first].name} ({why})")
        if restart:
            self._save(state)
        started = time.monotonic()
        for index in range(first, total):
            step = plan.steps[index]
            self._say(f"\n[{index + 1}/{total}] {step.name}: {step.title}")
            began = time.monotonic()
            outcome = self._step(plan, step, index)
            state[step.name] = {"fingerprint": fingerprint(step),
                                "at": datetime.now(UTC).isoformat(timespec="seconds"),
                                "outcome": outcome}
            self._save(state)
            self._say(f"  {outcome} ({time.monotonic() - began:.0f}s)")
        self._say(f"\naccelops deploy {plan.command} finished: {total - first} steps in "
                  f"{time.monotonic() - started:.0f}s")

    def _step(self, plan: Plan, step: Step, index: int) -> str:
        try:
            argv = self._resolve(plan, step.argv)
            env = {k: self._word(plan, v) for k, v in step.env}
            probe = self._resolve(plan, step.skip.argv) if step.skip else None
        except _MissingOutputError as missing:
            if step.optional:
                return f"skipped: terraform output has no {missing.output.label}. {step.note}"
            raise self._failed(plan, step, index,
                               f"it needs terraform output {missing.output.label}, which "
                               f"`terraform -chdir={plan.terraform_dir} output` does not "
                               "have: the apply that makes it has not run or did not "
                               "finish") from None
        # As it runs: Terraform's outputs filled in.
        shown = shlex.join([*(f"{k}={v}" for k, v in env.items()), *argv])
        self._say(f"  $ {shown}")
        if probe is not None and step.skip is not None:
            done = self._capture(probe, env, PROBE_TIMEOUT)
            if (done.code == 0) == (step.skip.done_when == "succeeds"):
                return f"skipped: {step.skip.reason}"
        finished = (self._repeat(step, argv, env) if step.repeat else
                    self._stream(argv, env, step.timeout_seconds))
        if argv[0] == "terraform":
            self._outputs = None  # the state changed: read outputs again
        if finished.code != 0 or finished.timed_out:
            why = (f"it did not finish within {step.timeout_seconds:g}s"
                   if finished.timed_out else f"it exited {finished.code}")
            raise self._failed(plan, step, index, why, finished.output, shown)
        return "done"

    def _repeat(self, step: Step, argv: list[str], env: Mapping[str, str]) -> _Finished:
        """Attempts until the output stops matching; ``timeout_seconds`` bounds them all
        (an attempt that hangs, webhooks timing out one object after another, ends the
        step as surely as the number of attempts does)."""
        assert step.repeat is not None
        r = step.repeat
        pattern = re.compile(r.pattern)
        deadline = time.monotonic() + step.timeout_seconds
        attempt = 0
        while True:
            attempt += 1
            finished = self._capture(argv, env, max(deadline - time.monotonic(), 1.0))
            match = pattern.search(finished.output)
            if match is None and not finished.timed_out:
                self._indent(finished.output)
                return _Finished(0, finished.output)
            line = _line_of(finished.output, match.start()) if match else "no answer"
            self._say(f"  attempt {attempt}/{r.attempts}: waiting for {r.waiting_for}: "
                      f"{line}")
            if attempt >= r.attempts or time.monotonic() + r.interval_seconds >= deadline:
                break
            time.sleep(r.interval_seconds)
        hint = f" {r.hint}" if r.hint else ""
        return _Finished(1, f"still waiting for {r.waiting_for} after {attempt} attempts "
                            f"in {step.timeout_seconds:g}s at most.{hint}\n{finished.output}")

    # ------------------------------------------------------------------ processes
    def _argv(self, argv: list[str]) -> list[str]:
        if argv and argv[0] == "accelops":
            return [sys.executable, "-m", "shared.cli", *argv[1:]]
        return argv

    def _popen(self, argv: list[str], env: Mapping[str, str],
               stdin: int | None) -> subprocess.Popen[bytes]:
        try:
            return subprocess.Popen(  # noqa: S603 - the plan's own commands, no shell
                self._argv(argv), cwd=self.root, env={**os.environ, **env}, stdin=stdin,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        except FileNotFoundError as exc:
            raise StepFailedError(f"{argv[0]} is not installed (not on PATH); "
                                  "deploy needs terraform, gcloud and kubectl") from exc

    def _stream(self, argv: list[str], env: Mapping[str, str], timeout: float) -> _Finished:
        # stdin is passed through: Terraform asks on the terminal before it applies.
        return self._collect(self._popen(argv, env, None), timeout, echo=True)

    def _capture(self, argv: list[str], env: Mapping[str, str], timeout: float) -> _Finished:
        return self._collect(self._popen(argv, env, subprocess.DEVNULL), timeout, echo=False)

    def _collect(self, process: subprocess.Popen[bytes], timeout: float, *,
                 echo: bool) -> _Finished:
        assert process.stdout is not None
        fd = process.stdout.fileno()
        kept = bytearray()
        deadline = time.monotonic() + timeout
        at_line_start = True
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    _kill(process)
                    return _Finished(-1, kept.decode(errors="replace"), timed_out=True)
                ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
                if not ready:
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                kept += chunk
                del kept[:-KEPT_OUTPUT]
                if echo:
                    at_line_start = self._echo(chunk.decode(errors="replace"), at_line_start)
            code = process.wait(timeout=max(deadline - time.monotonic(), 1.0))
        except BaseException:
            _kill(process)
            raise
        finally:
            process.stdout.close()
        if echo and not at_line_start:
            self.out.write("\n")
        return _Finished(code, kept.decode(errors="replace"))

    def _echo(self, text: str, at_line_start: bool) -> bool:
        for piece in text.splitlines(keepends=True):
            self.out.write(("    " if at_line_start else "") + piece)
            at_line_start = piece.endswith("\n")
        self.out.flush()
        return at_line_start

    # ------------------------------------------------------------------ outputs
    def _resolve(self, plan: Plan, args: tuple[Arg, ...]) -> list[str]:
        return [self._word(plan, a) for a in args]

    def _word(self, plan: Plan, arg: Arg) -> str:
        if isinstance(arg, Join):
            return "".join(self._word(plan, part) for part in arg.parts)
        if isinstance(arg, Output):
            return self._output(plan, arg)
        return arg

    def _output(self, plan: Plan, ref: Output) -> str:
        if self._outputs is None:
            self._outputs = self._read_outputs(plan)
        entry = self._outputs.get(ref.name)
        value = entry.get("value") if isinstance(entry, dict) else None
        for key in ref.keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None or isinstance(value, (dict, list)):
            raise _MissingOutputError(ref)
        text = str(value)
        return text.split("/", 1)[0] if ref.host else text

    def _read_outputs(self, plan: Plan) -> dict[str, Any]:
        if plan.terraform_dir is None:
            return {}
        argv = ["terraform", f"-chdir={plan.terraform_dir}", "output", "-json"]
        # stdout alone: Terraform warns on stderr (a missing CLI configuration, say).
        try:
            done = subprocess.run(argv, cwd=self.root, capture_output=True, text=True,  # noqa: S603
                                  timeout=PROBE_TIMEOUT, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise StepFailedError(f"`{' '.join(argv)}` failed: {exc}") from exc
        if done.returncode != 0:
            raise StepFailedError(f"`{' '.join(argv)}` failed ({done.returncode}):\n"
                                  f"{_tail(done.stderr or done.stdout)}")
        try:
            found = json.loads(done.stdout)
        except ValueError as exc:
            raise StepFailedError(f"`{' '.join(argv)}` printed no JSON:\n"
                                  f"{_tail(done.stdout)}") from exc
        return found if isinstance(found, dict) else {}

    # ------------------------------------------------------------------ state, text
    def _load(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.state_path.read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        completed = data.get("completed", {}) if isinstance(data, dict) else {}
        return {k: v for k, v in completed.items() if isinstance(v, dict) and "fingerprint" in v}

    def _save(self, state: Mapping[str, Any]) -> None:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.state_path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"completed": state}, indent=2) + "\n", "utf-8")
        temporary.replace(self.state_path)

    def _failed(self, plan: Plan, step: Step, index: int, why: str,
                output: str = "", shown: str | None = None) -> StepFailedError:
        last = f"\n{_tail(output)}\n" if output.strip() else "\n"
        command = shown or command_line(step, plan.terraform_dir)
        return StepFailedError(
            f"deploy {plan.command} stopped at step {index + 1}/{len(plan.steps)} "
            f"{step.name}: {why}.\n  command: {command}"
            f"{last}Fix the cause, then run `{self.rerun}` again: it resumes at "
            f"{step.name} (completed steps are recorded in {self.state_path}; --from STEP "
            "starts elsewhere, --restart from the first).")

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def _indent(self, text: str) -> None:
        if text.strip():
            self._echo(text if text.endswith("\n") else text + "\n", True)


def _line_of(text: str, position: int) -> str:
    start = text.rfind("\n", 0, position) + 1
    end = text.find("\n", position)
    line = text[start:end if end >= 0 else None].strip()
    return line if len(line) <= 300 else line[:297] + "..."


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(f"    {line}" for line in text.rstrip().splitlines()[-lines:])


def _kill(process: subprocess.Popen[bytes]) -> None:
    """Stop the step's process and whatever it started (its own session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
