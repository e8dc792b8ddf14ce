"""The sandbox's own map of which part runs each function and service stays in step
with the deployment definition (production code carries no sandbox parts)."""

from __future__ import annotations

from sandbox.topology import FUNCTION_PARTS, PARTS, SERVICE_PARTS, SERVICES
from shared.deployment import system


def test_every_function_has_a_sandbox_part_and_no_entry_is_stale() -> None:
    assert set(FUNCTION_PARTS) == {f.name for f in system.FUNCTIONS}
    assert set(FUNCTION_PARTS.values()) <= set(PARTS)


def test_every_service_has_an_entry_and_no_entry_is_stale() -> None:
    assert set(SERVICE_PARTS) == {s.name for s in system.SERVICES}
    assert {part for part in SERVICE_PARTS.values() if part is not None} <= set(PARTS)


def test_the_sandbox_serves_each_service_it_runs_by_its_wsgi_app() -> None:
    wsgi = {s.name: s.wsgi_app for s in system.SERVICES}
    assert {spec.name for spec in SERVICES} == {
        name for name, part in SERVICE_PARTS.items() if part is not None}
    assert all(wsgi[spec.name] == spec.wsgi_app for spec in SERVICES)
