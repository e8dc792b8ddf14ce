"""How a test runs Locust until it has made the requests it needs (``locust_until``):
the plugin's path and its options. Kept apart from the plugin, which imports Locust
(and with it gevent's monkey-patching) and so must never be imported by pytest."""

from __future__ import annotations

from pathlib import Path

UNTIL = Path(__file__).resolve().parent / "locust_until.py"


def until(requests: int, failures: int = 0, successes: int = 0,
          seconds: float = 0.0) -> list[str]:
    """Options that end the run once Locust counted what the test needs: a condition,
    not a duration, so a loaded machine only makes the run longer."""
    return ["--until-requests", str(requests), "--until-failures", str(failures),
            "--until-successes", str(successes), "--until-seconds", str(seconds)]
