"""The sandbox's own map of which part runs each function and service stays in step
with the deployment definition (production code carries no sandbox parts)."""

from __future__ import annotations

import dataclasses

import pytest

from sandbox.topology import FUNCTION_PARTS, PARTS, SERVICE_PARTS, SERVICES, FunctionSpec
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


def test_a_function_without_a_sandbox_part_is_refused_naming_where_to_add_it() -> None:
    known = system.FUNCTIONS[0]
    newcomer = dataclasses.replace(known, name="heartbeat")

    with pytest.raises(ValueError, match=r"'heartbeat'.*add it to FUNCTION_PARTS in "
                                         r"sandbox/topology\.py"):
        FunctionSpec.of(newcomer)
    assert FunctionSpec.of(known).part == FUNCTION_PARTS[known.name]
