"""The operator registry: kinds by name."""
from __future__ import annotations

import pyarrow as pa
import pytest

from weir.engine.errors import EngineError
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.calc import Calc
from weir.engine.operators.registry import OPERATORS, build_operator
from weir.engine.operators.window_aggregate import WindowAggregate


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

