"""The operator registry, and the layering rule for engine/operators."""
from __future__ import annotations

import ast
from pathlib import Path

import pyarrow as pa
import pytest

import engine.operators
from engine.errors import EngineError
from engine.operators.base import OperatorContext
from engine.operators.calc import Calc
from engine.operators.registry import OPERATORS, build_operator
from engine.operators.window_aggregate import WindowAggregate


def test_kinds_build_their_operator():
    ctx = OperatorContext("op", pa.schema([("a", pa.int64())]))
    assert isinstance(build_operator("calc", {"projection": [["a", "a"]]}, ctx), Calc)
    window = {"window": {"kind": "tumble", "time_column": "t", "size": 1000},
              "keys": [], "aggregates": [], "projection": [["a", "1"]]}
    assert isinstance(build_operator("window_aggregate", window, ctx), WindowAggregate)
    assert set(OPERATORS) >= {"calc", "window_aggregate"}


def test_an_unknown_kind_names_the_known_ones():
    ctx = OperatorContext("op7", pa.schema([]))
    with pytest.raises(EngineError, match="unknown operator kind 'join'") as info:
        build_operator("join", {}, ctx)
    assert "calc" in info.value.hint and info.value.operator_id == "op7"


def test_operators_import_no_higher_layer():
    forbidden = {"sql", "planner", "shell", "sqlglot"}
    for path in Path(engine.operators.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in forbidden, f"{path.name} imports {name}"
