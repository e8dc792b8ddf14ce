"""Every Cloud Run function has the same shape: its entry point in functions/main.py
hands the event to ``on_message(message)`` of one core module (``on_object(event)`` for a
storage-triggered function) through shared.handler, and nothing else."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from shared.deployment import system

MAIN = Path(__file__).resolve().parents[2] / "functions" / "main.py"
ENTRY_POINTS = {node.name: node for node in ast.parse(MAIN.read_text("utf-8")).body
                if isinstance(node, ast.FunctionDef)}
FUNCTIONS = {function.name: function for function in system.FUNCTIONS}


def test_every_function_of_the_definition_has_an_entry_point_and_no_more() -> None:
    assert set(ENTRY_POINTS) == set(FUNCTIONS)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_the_entry_point_hands_its_event_to_one_core_through_the_handler(name: str) -> None:
    core_name = "on_object" if FUNCTIONS[name].storage_trigger else "on_message"
    imports = {alias.name: node.module for node in ast.walk(ENTRY_POINTS[name])
               if isinstance(node, ast.ImportFrom) for alias in node.names}
    calls = [node for node in ast.walk(ENTRY_POINTS[name]) if isinstance(node, ast.Call)]

    assert imports.get(core_name, "").startswith("shared."), imports
    [call] = calls
    assert isinstance(call.func, ast.Name)
    assert call.func.id in ("handle_pubsub", "handle_event")
    assert imports[call.func.id] == "shared.handler"
    assert core_name in {arg.id for arg in call.args if isinstance(arg, ast.Name)}
    assert name in {arg.value for arg in call.args if isinstance(arg, ast.Constant)}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_the_core_takes_the_event_alone(name: str) -> None:
    core_name = "on_object" if FUNCTIONS[name].storage_trigger else "on_message"
    [module] = [node.module for node in ast.walk(ENTRY_POINTS[name])
                if isinstance(node, ast.ImportFrom)
                and any(alias.name == core_name for alias in node.names)]
    core = getattr(importlib.import_module(str(module)), core_name)
    first, *rest = inspect.signature(core).parameters.values()

    assert first.name == ("event" if core_name == "on_object" else "message")
    assert all(parameter.default is not inspect.Parameter.empty for parameter in rest)
