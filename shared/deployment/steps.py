"""The steps of a deployment sequence, as data: what ``accelops deploy up|down`` runs,
prints with ``--plan`` and resumes after a failure.

A step is one command (an argv, never a shell line) with what it needs to run well:
environment variables, a probe that says its work is already done (a bucket that
exists, an image already pushed: tags are immutable, so pushing again would fail),
a bounded repeat while its output says "not yet" (webhooks that do not answer),
and a timeout. Values only Terraform knows (bucket names, the image repository,
Eventarc's subscription) are :class:`Output` references, read when the step runs.

Everything here is pure: :func:`script` renders a plan as the shell commands a
person could paste instead (Terraform outputs as ``$(terraform output ...)``), and
:func:`start_index` decides where a rerun resumes. ``shared/deployment/runner.py``
carries the steps out.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from shared.errors import ConfigError

__all__ = ["Arg", "Join", "Output", "Plan", "Probe", "Repeat", "Step", "command_line",
           "fingerprint", "outputs_of", "script", "start_index"]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class Output:
    """A value of ``terraform output -json``: the output ``name``, then ``keys`` into
    its object. ``host``: only the registry host of an image path (``<host>/...``)."""

    name: str
    keys: tuple[str, ...] = ()
    host: bool = False

    @property
    def label(self) -> str:
        return ".".join((self.name, *self.keys))

    def shell(self, terraform_dir: str) -> str:
        """The shell substitution that reads this value (jq for a key of an object)."""
        tf = f"terraform -chdir={shlex.quote(terraform_dir)} output"
        if not self.keys:
            read = f"{tf} -raw {self.name}"
        else:
            path = "".join(f".{k}" if _IDENTIFIER.match(k) else f'.["{k}"]'
                           for k in self.keys)
            read = f"{tf} -json {self.name} | jq -r '{path}'"
        return f'"$({read}{" | cut -d/ -f1" if self.host else ""})"'


@dataclass(frozen=True, slots=True)
class Join:
    """One word made of text and Terraform outputs: ``gs://<bucket>/<object>``."""

    parts: tuple[str | Output, ...]


Arg = str | Output | Join


@dataclass(frozen=True, slots=True)
class Probe:
    """A quiet command whose exit status says the step's work is already done:
    ``done_when`` it "succeeds" (the bucket exists) or "fails" (nothing left)."""

    argv: tuple[Arg, ...]
    done_when: Literal["succeeds", "fails"]
    # Printed when the step is skipped: "the bucket exists".
    reason: str


@dataclass(frozen=True, slots=True)
class Repeat:
    """Run the command again while its output matches ``pattern`` (a regular
    expression), at most ``attempts`` times, ``interval_seconds`` apart. An attempt
    whose output does not match ends the step, whatever its exit status: the
    pattern is the one thing this step waits for."""

    pattern: str
    attempts: int
    interval_seconds: float
    # Printed with each attempt that matched: "Kueue's and JobSet's webhooks".
    waiting_for: str
    # Printed when the attempts are used up: what usually causes it.
    hint: str = ""


@dataclass(frozen=True, slots=True)
class Step:
    """One command of a sequence. ``name`` is what ``--from`` takes."""

    name: str
    title: str
    argv: tuple[Arg, ...]
    env: tuple[tuple[str, Arg], ...] = ()
    skip: Probe | None = None
    repeat: Repeat | None = None
    # A missing Output means there is nothing to do here (Eventarc's subscription on
    # the pubsub route), not an error.
    optional: bool = False
    timeout_seconds: float = 1800.0
    # Said in --plan and when skipped for a missing Output.
    note: str = ""

    def outputs(self) -> list[Output]:
        """Every Terraform output the step reads."""
        return outputs_of([*self.argv, *(v for _, v in self.env),
                           *(self.skip.argv if self.skip else ())])


def outputs_of(args: list[Arg]) -> list[Output]:
    found: list[Output] = []
    for arg in args:
        if isinstance(arg, Output):
            found.append(arg)
        elif isinstance(arg, Join):
            found += [p for p in arg.parts if isinstance(p, Output)]
    return found


@dataclass(frozen=True, slots=True)
class Plan:
    """A whole sequence: ``accelops deploy <command>`` for one target."""

    command: str
    steps: tuple[Step, ...]
    # Where Terraform's outputs are read (None: no step reads any).
    terraform_dir: str | None
    # What the summary line says it deploys: "project my-ml, config accelops.yaml".
    target: str

    def names(self) -> list[str]:
        return [step.name for step in self.steps]


def fingerprint(step: Step) -> str:
    """Changes whenever the step would run something else (other flags, a new commit
    the images are built from): a recorded step with another fingerprint runs again on
    resume. Terraform outputs are references here, not their values."""
    return hashlib.sha256(repr(step).encode()).hexdigest()[:16]


def start_index(plan: Plan, completed: Mapping[str, str], *, from_step: str | None = None,
                restart: bool = False) -> int:
    """Where a run starts: ``from_step``; the first step with ``restart``; otherwise the
    first step not recorded as completed with its current fingerprint (len(steps):
    nothing left). Raises ConfigError for an unknown step name."""
    names = plan.names()
    if from_step is not None:
        if from_step not in names:
            raise ConfigError(f"no step {from_step!r} in deploy {plan.command}; its steps: "
                              + ", ".join(names))
        return names.index(from_step)
    if restart:
        return 0
    for index, step in enumerate(plan.steps):
        if completed.get(step.name) != fingerprint(step):
            return index
    return len(plan.steps)


# --------------------------------------------------------------------- shell rendering
def _words(args: tuple[Arg, ...], terraform_dir: str | None) -> str:
    def word(arg: Arg) -> str:
        if isinstance(arg, Join):
            # Adjacent quoted pieces are one word to the shell.
            return "".join(word(part) for part in arg.parts)
        if isinstance(arg, Output):
            if terraform_dir is None:
                raise ValueError(f"{arg.label}: the plan names no Terraform directory")
            return arg.shell(terraform_dir)
        return shlex.quote(arg)

    return " ".join(word(a) for a in args)


def command_line(step: Step, terraform_dir: str | None) -> str:
    """The step's command as a shell line, its environment in front."""
    env = " ".join(f"{k}={_words((v,), terraform_dir)}" for k, v in step.env)
    return f"{env} {_words(step.argv, terraform_dir)}".strip()


def _step_script(step: Step, terraform_dir: str | None) -> list[str]:
    line = command_line(step, terraform_dir)
    if step.repeat is not None:
        r = step.repeat
        # shlex.quote keeps the pattern one word; grep -E reads the same syntax.
        line = "\n".join([
            f"for attempt in $(seq {r.attempts}); do",
            f"  if ! {line} 2>&1 | grep -Eq {shlex.quote(r.pattern)}; then break; fi",
            f"  sleep {r.interval_seconds:g}",
            "done"])
    if step.skip is not None:
        probe = _words(step.skip.argv, terraform_dir)
        negate = "! " if step.skip.done_when == "succeeds" else ""
        body = "\n".join(f"  {part}" for part in line.splitlines())
        line = f"if {negate}{probe} >/dev/null 2>&1; then\n{body}\nfi"
    return line.splitlines()


def script(plan: Plan) -> str:
    """The plan as commands to paste into a shell, one commented block per step."""
    out = [f"# accelops deploy {plan.command}: {len(plan.steps)} steps ({plan.target})",
           "# Run from the repository root."]
    for number, step in enumerate(plan.steps, 1):
        out.append("")
        out.append(f"# [{number}/{len(plan.steps)}] {step.name}: {step.title}")
        if step.note:
            out.append(f"# {step.note}")
        out.extend(_step_script(step, plan.terraform_dir))
    return "\n".join(out) + "\n"
