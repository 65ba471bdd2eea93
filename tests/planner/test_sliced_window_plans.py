"""Planning HOP and CUMULATE: their window config, and errors for sizes Flink would refuse."""
from __future__ import annotations

import pytest

from weir.planner.planner import plan_script
from weir.sql import parse
from test_planner_errors import CATALOG, at, the_problem


def window_config(statements: str) -> dict:
    script = plan_script(parse(CATALOG + statements))
    for node in script.graph.nodes:
        if node.kind == "window_aggregate":
            return node.config.window.to_json()
    raise AssertionError("no window_aggregate in the plan")


@pytest.mark.parametrize("call, expected", [
    ("HOP(TABLE bids, DESCRIPTOR(date_time), INTERVAL '2' SECOND, INTERVAL '10' SECOND)",
     {"kind": "hop", "time_column": "date_time", "size": 10_000_000, "slide": 2_000_000, "offset": 0}),
    ("HOP(DATA => TABLE bids, TIMECOL => DESCRIPTOR(date_time), SLIDE => INTERVAL '1' MINUTE, "
     "SIZE => INTERVAL '1' HOUR, OFFSET => INTERVAL '5' SECOND)",
     {"kind": "hop", "time_column": "date_time", "size": 3_600_000_000, "slide": 60_000_000,
      "offset": 5_000_000}),
    ("CUMULATE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND, INTERVAL '1' MINUTE)",
     {"kind": "cumulate", "time_column": "date_time", "size": 60_000_000, "step": 10_000_000, "offset": 0}),
])
def test_hop_and_cumulate_plan_to_a_sliced_window_config(call, expected):
    sql = (f"INSERT INTO counts SELECT auction, COUNT(*) FROM TABLE({call}) "
           "GROUP BY auction, window_start, window_end")
    assert window_config(sql) == expected


@pytest.mark.parametrize("kind, part", [("HOP", "slide"), ("CUMULATE", "step")])
def test_a_size_that_is_not_a_multiple_of_the_slide_or_step_is_refused(kind, part):
    sql = (f"INSERT INTO counts SELECT auction, COUNT(*) FROM TABLE({kind}(TABLE bids, DESCRIPTOR(date_time), "
           "INTERVAL '3' SECOND, INTERVAL '10' SECOND)) GROUP BY auction, window_start, window_end")
    p = the_problem(sql)
    assert p.message == f"{kind} size 10 s is not an integral multiple of its {part} 3 s"
    assert (p.line, p.col) == at(sql, "INTERVAL '10' SECOND")
    assert p.hint == f"make the size a multiple of the {part}, e.g. 9 s, or the {part} a divisor of the size"


def test_a_zero_slide_is_refused():
    sql = ("INSERT INTO counts SELECT auction, COUNT(*) FROM TABLE(HOP(TABLE bids, DESCRIPTOR(date_time), "
           "INTERVAL '0' SECOND, INTERVAL '10' SECOND)) GROUP BY auction, window_start, window_end")
    p = the_problem(sql)
    assert "slide" in p.message and "must be positive" in p.message
    assert (p.line, p.col) == at(sql, "INTERVAL '0' SECOND")


def test_the_legacy_hop_group_window_plans_like_the_table_function():
    legacy = ("INSERT INTO counts SELECT auction, COUNT(*) FROM bids "
              "GROUP BY HOP(date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND), auction")
    tvf = ("INSERT INTO counts SELECT auction, COUNT(*) FROM TABLE(HOP(TABLE bids, DESCRIPTOR(date_time), "
           "INTERVAL '2' SECOND, INTERVAL '10' SECOND)) GROUP BY auction, window_start, window_end")
    assert window_config(legacy) == window_config(tvf)

