"""``Sandbox.stop``: the order in which a sandbox's processes are stopped, and that a
tier's processes wind down together rather than one after another.

The processes are small real children (a few lines of Python each) standing in for
the sandbox's components: each one, on SIGTERM, records that it was signalled and
what it saw of the others, then exits. Nothing here times anything: who saw whom
is the evidence.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from sandbox.supervisor.endpoints import Component
from sandbox.supervisor.runner import Sandbox

# On SIGTERM: mark "<name>.term"; wait (bounded) until every name in WAIT has its
# mark too, and only then mark "<name>.clean" and exit; record which marks of SEEN
# were there when the signal came.
CHILD = r"""
import os, signal, sys, time
from pathlib import Path
marks, name = Path(sys.argv[1]), sys.argv[2]
wait = [w for w in sys.argv[3].split(",") if w]
seen = [s for s in sys.argv[4].split(",") if s]
def on_term(signum, frame):
    present = [s for s in seen if (marks / f"{s}.term").exists()]
    (marks / f"{name}.saw").write_text(",".join(present))
    (marks / f"{name}.term").touch()
    deadline = time.monotonic() + 30
    while not all((marks / f"{w}.term").exists() for w in wait):
        if time.monotonic() > deadline:
            sys.exit(3)
        time.sleep(0.01)
    (marks / f"{name}.clean").touch()
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
(marks / f"{name}.ready").touch()
while True:
    time.sleep(0.05)
"""


def start(sandbox: Sandbox, marks: Path, name: str, wait: tuple[str, ...] = (),
          seen: tuple[str, ...] = ()) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(marks), name, ",".join(wait), ",".join(seen)],
        start_new_session=True)
    sandbox.components[name] = Component(name, 0, [], str(marks / f"{name}.log"),
                                         pid=process.pid)


def wait_ready(marks: Path, names: list[str]) -> None:
    deadline = time.monotonic() + 30
    while not all((marks / f"{n}.ready").exists() for n in names):
        assert time.monotonic() < deadline, "the stand-in processes did not start"
        time.sleep(0.01)


def test_stopping_signals_every_function_at_once_so_none_waits_out_another(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    sandbox = Sandbox(tmp_path / "state", parts={"jobs"}, pubsub="standin")
    # Each function exits only once the other has been signalled too: stopped one
    # after the other, the first would be killed when its grace ran out.
    start(sandbox, marks, "submit_job", wait=("reconcile_slices",))
    start(sandbox, marks, "reconcile_slices", wait=("submit_job",))
    wait_ready(marks, ["submit_job", "reconcile_slices"])

    sandbox.stop()

    assert (marks / "submit_job.clean").exists()
    assert (marks / "reconcile_slices.clean").exists()


def test_stopping_ends_functions_and_services_first_then_backends_and_pubsub_last(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    sandbox = Sandbox(tmp_path / "state", parts={"jobs"}, pubsub="standin")
    serving = ("submit_job", "jobs_api")
    start(sandbox, marks, "pubsub", seen=("cluster", "idtokens", *serving))
    start(sandbox, marks, "cluster", seen=serving)
    start(sandbox, marks, "idtokens", seen=serving)
    start(sandbox, marks, "submit_job", seen=("cluster", "idtokens", "pubsub"))
    start(sandbox, marks, "jobs_api", seen=("cluster", "idtokens", "pubsub"))
    wait_ready(marks, list(sandbox.components))

    sandbox.stop()

    def saw(name: str) -> set[str]:
        return set(filter(None, (marks / f"{name}.saw").read_text().split(",")))

    assert saw("submit_job") == saw("jobs_api") == set()
    assert saw("cluster") == saw("idtokens") == set(serving)
    assert saw("pubsub") == {"cluster", "idtokens", *serving}
