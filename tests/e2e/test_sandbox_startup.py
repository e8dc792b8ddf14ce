"""`accelops sandbox up` on a busy machine: a part that is slow to answer is waited for
while it runs, one that exits fails the start at once, and the deadline that remains
is the configured one, its error naming the part, its log and the setting to raise.

A slow part is the real Pub/Sub stand-in held back by a shell that sleeps before it
execs it (same pid, alive all along, the way a stand-in importing its clients on a
loaded machine looks from outside); the sandbox is just Pub/Sub (no parts), the
cheapest there is, so the waits are seconds, not the minutes they stand for.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.supervisor.provision import KubectlTimeoutError, kubectl
from sandbox.supervisor.runner import Sandbox, SandboxError

pytestmark = pytest.mark.e2e


class _HeldBack(Sandbox):
    """A sandbox whose Pub/Sub runs ``shell`` (a ``sh -c`` script) before the real
    command: ``exec "$@"`` in it starts the stand-in in the same process."""

    def __init__(self, state_dir: Path, shell: str, **kwargs: float) -> None:
        super().__init__(state_dir, parts=(), pubsub="standin", **kwargs)
        self.shell = shell

    def _plan(self) -> None:
        super()._plan()
        pubsub = self.components["pubsub"]
        pubsub.command = ["sh", "-c", self.shell, "held-back", *pubsub.command]


def test_a_part_slow_to_answer_is_waited_for_with_progress_printed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sandbox = _HeldBack(tmp_path, 'sleep 6; exec "$@"', start_timeout=60.0)
    sandbox.start(progress=True)
    try:
        assert all(up for _, _, up, _ in sandbox.status())
    finally:
        sandbox.stop()
    out = capsys.readouterr().out
    assert "  waiting for pubsub (5 s)…\n" in out
    assert "  pubsub up after " in out


def test_a_part_slower_than_the_deadline_fails_naming_its_log_and_the_setting(
        tmp_path: Path) -> None:
    sandbox = _HeldBack(tmp_path, 'sleep 120; exec "$@"', start_timeout=2.0)
    with pytest.raises(SandboxError) as raised:
        sandbox.start(progress=False)
    log = tmp_path.resolve() / "logs" / "pubsub.log"
    assert str(raised.value) == (
        f"pubsub did not answer within 2 s, though still running; see its log {log}. "
        "if the machine is busy, give it longer: `accelops sandbox up --start-timeout 600` "
        "(or ACCELOPS_SANDBOX_START_TIMEOUT=600; now 2 s)")
    assert not (tmp_path / "state.json").exists()  # what it started was stopped


def test_a_part_that_exits_fails_the_start_at_once_with_its_log_tail(tmp_path: Path) -> None:
    sandbox = _HeldBack(tmp_path, 'echo "pubsub: cannot bind, giving up" >&2; exit 3',
                        start_timeout=600.0)
    with pytest.raises(SandboxError, match=(
            r"^pubsub exited during start-up after \d+ s; see .*/logs/pubsub\.log:\n"
            r"pubsub: cannot bind, giving up$")):
        sandbox.start(progress=False)


@pytest.fixture
def silent_server(tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig naming a server that accepts connections and never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: silent\n"
            f"clusters:\n- name: silent\n  cluster:\n    server: http://127.0.0.1:{port}\n"
            "contexts:\n- name: silent\n  context:\n    cluster: silent\n    user: nobody\n"
            "users:\n- name: nobody\n  user: {}\n")
        yield kubeconfig


def test_a_kubectl_step_past_its_deadline_is_stopped_and_says_what_to_raise(
        silent_server: Path) -> None:
    lines: list[str] = []
    with pytest.raises(KubectlTimeoutError) as raised:
        kubectl(silent_server, "get", "namespaces", timeout=6.0, progress=lines.append)
    assert str(raised.value).startswith(
        "kubectl get namespaces was still running after 6 s and was stopped; see the "
        f"cluster's log ({silent_server.parent / 'logs' / 'cluster.log'}). if the machine "
        "is busy, give it longer: `accelops sandbox up --start-timeout 600`")
    assert lines == ["waiting for kubectl get namespaces (5 s)…"]
