"""'python.udf.bad-rows.table' and exceptions inside a Python aggregate function's methods.

A change row ``accumulate`` (+I, +U) or ``retract`` (-U, -D) raises on in a GROUP BY is the bad
row: the group aggregate rolls the batch back, learns which rows raise (each failing group's rows
folded in one at a time) and applies the batch without them, so every aggregate of the query
(built-in ones too) is as if the row never arrived; over an updating input an addition left out
is remembered (checkpointed state) so that its retraction, whenever it comes, is left out too.
What fails otherwise — merge, get_value (accumulators, no row) — still fails the job naming the
function, the method, the accumulators, the group key, the traceback and why the setting did not
keep it. Windows and OVER: ``test_udaf_window_bad_rows.py``.
"""
from __future__ import annotations

import dataclasses
import functools
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_udf_bad_rows_places import FUNCTIONS, bad_rows_of, changes

from weir.engine.changelog import DELETE, INSERT, ROW_KIND, UPDATE_AFTER, UPDATE_BEFORE
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.registry import operator_class
from weir.engine.udfs import UdfError
from weir.planner.planner import plan_script
from weir.sql import parse

UDAFS = ("CREATE FUNCTION picky AS 'udaf_functions.Picky' LANGUAGE PYTHON; "
         "CREATE FUNCTION pickya AS 'udaf_functions.PickyArrow' LANGUAGE PYTHON;")
GROUPED = "CREATE MATERIALIZED VIEW s AS SELECT k, picky(v) AS p, pickya(v) AS q, COUNT(*) AS n, SUM(v) AS b " \
          "FROM a GROUP BY k;"


@functools.cache
def planned(sql: str):
    return plan_script(parse(FUNCTIONS.format(data="/nowhere") + UDAFS + sql), db_path="/nowhere/r.duckdb",
                       settings={"python.udf.bad-rows.table": "udf_bad_rows"}).graph


def operator(graph, node_id: str, **changed):
    node = graph.node(node_id)
    config = dataclasses.replace(node.config, **changed) if changed else node.config
    ctx = OperatorContext(node.id, node.output_schema)
    return operator_class(node.kind)(config, ctx), ctx


def rows_of(ks: list[int], vs: list[int], **more) -> pa.Table:
    return pa.table({"ts": pa.array([0] * len(vs), pa.timestamp("us")), "k": pa.array(ks, pa.int64()),
                     "v": pa.array(vs, pa.int64()), **more})


def test_the_group_aggregate_of_a_python_aggregate_sends_its_bad_rows_to_the_table():
    graph = planned(GROUPED)
    assert graph.node("s.group_aggregate").config.bad_rows
    assert any(e.source == "s.group_aggregate" for e in graph.node("udf_bad_rows.sink").inputs)


@settings(max_examples=25, deadline=None)
@given(vs=st.lists(st.integers(0, 40), max_size=25), batch=st.integers(1, 8))
def test_a_row_accumulate_raises_on_is_left_out_of_every_aggregate_and_kept_once(vs, batch):
    """picky (a row at a time) and pickya (its group's values as arrays) raise on a v ending in 5:
    whatever the batches, each group's results are those of its other rows — COUNT(*) and SUM too —
    and the bad rows are those rows, in order, each once."""
    op, ctx = operator(planned(GROUPED), "s.group_aggregate")
    result = Counter()
    for part in rows_of([v % 3 for v in vs], vs).to_batches(max_chunksize=batch):
        changes(result, op.process_batch(part))
    op.close()
    good = [v for v in vs if v % 10 != 5]
    sums = {k: [v for v in good if v % 3 == k] for k in {v % 3 for v in good}}
    assert result == Counter({(k, sum(g), sum(g), len(g), sum(g)): 1 for k, g in sums.items()})
    listed = bad_rows_of(ctx)
    assert [row["v"] for _, row in listed] == [v for v in vs if v % 10 == 5]
    assert {function for function, _ in listed} <= {"picky (accumulate)", "pickya (accumulate)"}


def test_a_bad_row_in_the_first_batch_rolls_back_the_state_tables_and_the_rerun_makes_them_again():
    """The first batch creates the state tables inside the transaction its bad row rolls back; the
    batch run again without that row (and every batch after it) finds them made anew."""
    op, ctx = operator(planned(GROUPED), "s.group_aggregate")
    result = Counter()
    for part in (rows_of([1, 2], [5, 7]), rows_of([1, 2], [8, 15])):
        changes(result, op.process_batch(part.to_batches()[0]))
    op.close()
    assert result == Counter({(1, 8, 8, 1, 8): 1, (2, 7, 7, 1, 7): 1})
    assert [row["v"] for _, row in bad_rows_of(ctx)] == [5, 15]


@settings(max_examples=25, deadline=None)
@given(script=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40), st.sampled_from("IDU")), max_size=25),
       batch=st.integers(1, 8), cut=st.integers(0, 4))
def test_over_an_updating_input_a_change_row_accumulate_or_retract_raises_on_is_left_out(script, batch, cut):
    """pickyr's accumulate raises on a v ending in 5, its retract on one ending in 7, over a changelog
    (+I rows; -D and -U/+U of earlier rows). Whatever the batches: an addition that raises is listed
    and left out, and so is its retraction, whenever it comes (unlisted: a changelog retracts only
    what it added); a retraction that raises otherwise is listed and left out; each group's results
    (COUNT(*) and SUM too) are those of the other change rows. A snapshot part-way, restored into
    another operator, carries the additions left out whose retraction is still to come."""
    sql = ("CREATE FUNCTION pickyr AS 'udaf_functions.PickyRetract' LANGUAGE PYTHON; "
           "CREATE MATERIALIZED VIEW s AS SELECT k, pickyr(v) AS p, COUNT(*) AS n, SUM(v) AS b FROM a GROUP BY k;")
    op, ctx = operator(planned(sql), "s.group_aggregate", append_only_input=False)
    ks, vs, kinds, held = [], [], [], []  # held: (k, v) of the rows added and not yet taken back
    for k, v, what in script:
        kind = INSERT
        if what != "I" and held:
            k, old_v = held.pop(v % len(held))
            ks.append(k), vs.append(old_v), kinds.append(DELETE if what == "D" else UPDATE_BEFORE)
            if what == "D":
                continue
            kind = UPDATE_AFTER
        ks.append(k), vs.append(v), kinds.append(kind)
        held.append((k, v))
    adds = (INSERT, UPDATE_AFTER)
    left_out, listed_model, groups = Counter(), [], {}
    for k, v, kind in zip(ks, vs, kinds):  # the model: change rows one by one
        if kind in adds and v % 10 == 5:
            left_out[k, v] += 1
            listed_model.append(("pickyr (accumulate)", v, kind))
        elif kind not in adds and left_out[k, v]:
            left_out[k, v] -= 1
        elif kind not in adds and v % 10 == 7:
            listed_model.append(("pickyr (retract)", v, kind))
        else:
            group = groups.setdefault(k, [0, 0])
            sign = 1 if kind in adds else -1
            group[0] += sign * v
            group[1] += sign
    # the batches, with a snapshot after the first ``cut`` restored into a new operator for the rest
    result, listed = Counter(), []
    parts = rows_of(ks, vs, **{ROW_KIND: pa.array(kinds, pa.int8())}).to_batches(max_chunksize=batch)
    for part in parts[:cut]:
        changes(result, op.process_batch(part))
    snapshot = op.snapshot()
    listed += bad_rows_of(ctx)
    op.close()
    op, ctx = operator(planned(sql), "s.group_aggregate", append_only_input=False)
    op.restore(snapshot)
    for part in parts[cut:]:
        changes(result, op.process_batch(part))
    listed += bad_rows_of(ctx)
    assert result == Counter({(k, s, n, s): 1 for k, (s, n) in groups.items() if n > 0})
    assert [(f, row["v"], row[ROW_KIND]) for f, row in listed] == listed_model
    # the additions left out whose retraction is yet to come are state
    table = op.snapshot()["tables"].get("left_out_additions")
    assert sum(table["__count"].to_pylist() if table is not None else []) == sum(left_out.values())
    op.close()


def test_get_value_raising_fails_the_job_naming_the_function_the_accumulator_the_key_and_the_traceback():
    op, _ = operator(planned("CREATE MATERIALIZED VIEW s AS SELECT k, picky(v) AS p FROM a GROUP BY k;"),
                     "s.group_aggregate")
    with pytest.raises(UdfError) as raised:
        op.process_batch(rows_of([2, 2], [600, 700]).to_batches()[0])
    op.close()
    error = raised.value
    assert error.message == ("the Python function picky (get_value) failed on the accumulator ([1300, 2]) of the "
                             "group with the key (2): OverflowError: 1300 is too much")
    assert "fails the job even with 'python.udf.bad-rows.table'" in error.hint
    assert 'raise OverflowError(f"{acc[0]} is too much")' in error.hint  # the traceback


def test_merge_raising_in_a_window_fails_the_job_naming_the_accumulators_and_why_no_row_is_kept():
    """Two batches of one key and window: two partial accumulators, merged as the window fires."""
    graph = planned("CREATE FUNCTION mergefails AS 'udaf_functions.MergeFails' LANGUAGE PYTHON; "
                    "CREATE MATERIALIZED VIEW s AS SELECT k, window_start, mergefails(v) AS m FROM "
                    "TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end;")
    op, _ = operator(graph, "s.window_aggregate")
    with pytest.raises(UdfError) as raised:
        op.process_batch(rows_of([1], [3]).to_batches()[0])
        op.process_batch(rows_of([1], [4]).to_batches()[0])
        op.process_watermark(60_000_000)
    op.close()
    error = raised.value
    assert "the Python function mergefails (merge) failed on the accumulators (" in error.message
    assert "RuntimeError: cannot merge 1 more into [" in error.message
    assert "(it fails on accumulators, not on an input row that could be kept)" in error.hint
    assert "raise RuntimeError" in error.hint  # the traceback
