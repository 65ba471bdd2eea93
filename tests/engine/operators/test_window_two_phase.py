"""Two-phase window aggregation: partials pre-aggregated by upstream subtasks and appended by
the owner give what one phase gives, with the same late and NULL-time counts."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from weir.engine.messages import MIN_WATERMARK
from weir.engine.operators.window_aggregate import PARTIALS
from weir.engine.state.key_groups import KEY_GROUP_COLUMN
from weir.engine.state.key_groups import key_groups
from test_window_aggregate_oracle import CONFIG, SCHEMA, Rng, random_bids
from window_harness import SECOND, assert_same_rows, drive_to_end, make_window_op, to_rows

#: The oracle test's aggregates but the DISTINCT ones, which are not pre-aggregated.
COMBINABLE = {
    **CONFIG,
    "aggregates": [a for a in CONFIG["aggregates"] if not a.get("distinct")],
    "having": "n >= 2 OR total IS NULL",
    "projection": [p for p in CONFIG["projection"]
                   if p[0] not in ("bidders", "big_bidders", "bidder_sum", "bidder_avg", "low_d", "score")],
}
COMBINABLE_SCHEMA = pa.schema([f for f in SCHEMA if f.name in {p[0] for p in COMBINABLE["projection"]}])

WINDOWS = {
    "tumble": {"kind": "tumble", "time_column": "ts", "size": 10 * SECOND, "offset": 3 * SECOND},
    "hop": {"kind": "hop", "time_column": "ts", "size": 4 * SECOND, "slide": 2 * SECOND, "offset": 0},
    "cumulate": {"kind": "cumulate", "time_column": "ts", "size": 12 * SECOND, "step": 4 * SECOND, "offset": 0},
}


def script(seed: int) -> list[pa.RecordBatch | int]:
    """Random bids (NULLs, disorder) cut into batches, with watermarks that make rows late."""
    rng = Rng(seed)
    table = random_bids(rng, 3000, disorder=int(rng.integers(SECOND, 8 * SECOND)))
    steps, start, max_ts = [], 0, MIN_WATERMARK
    while start < table.num_rows:
        batch = table.slice(start, int(rng.integers(1, 100))).combine_chunks().to_batches()[0]
        start += batch.num_rows
        steps.append(batch)
        max_ts = max(max_ts, pc.max(batch.column("ts").cast(pa.int64())).as_py() or max_ts)
        if rng.random() < 0.6:
            steps.append(max_ts + int(rng.integers(-SECOND, 3 * SECOND)))
    return steps


def one_phase(config, steps):
    op = make_window_op(config, COMBINABLE_SCHEMA, max_parallelism=16)
    return to_rows(drive_to_end(op, steps), COMBINABLE_SCHEMA), op.ctx.metrics


def two_phase(config, steps):
    """Two upstream subtasks pre-aggregate alternate batches; the owner gets their partials,
    sometimes two at a time (as the exchange coalesces them), and the watermarks."""
    locals_ = [make_window_op(config, COMBINABLE_SCHEMA, max_parallelism=16) for _ in range(2)]
    owner = make_window_op(config, COMBINABLE_SCHEMA, max_parallelism=16)
    assert owner.combinable
    out, held, turn = [], [], 0
    for step in steps:
        if isinstance(step, int):
            for partials in held:
                out += owner.process_batch(partials)
            held = []
            out += owner.process_watermark(step)
            continue
        partials = locals_[turn % 2].pre_aggregate(step)
        turn += 1
        assert partials.schema.metadata == PARTIALS
        assert partials.num_rows <= step.num_rows
        held.append(partials)
        if len(held) == 2:
            out += owner.process_batch(pa.concat_batches(held))
            held = []
    for partials in held:
        out += owner.process_batch(partials)
    out += drive_to_end(owner, [])
    metrics = dict(owner.ctx.metrics)
    for op in locals_:
        for name, value in op.ctx.metrics.items():
            metrics[name] = metrics.get(name, 0) + value
    return to_rows(out, COMBINABLE_SCHEMA), metrics


@pytest.mark.parametrize("window", sorted(WINDOWS))
@pytest.mark.parametrize("seed", range(3))
def test_partials_appended_by_the_owner_give_the_one_phase_result(window, seed):
    config = {**COMBINABLE, "window": WINDOWS[window]}
    steps = script(seed)
    expected, one = one_phase(config, steps)
    got, two = two_phase(config, steps)
    assert len(expected) > 20
    assert_same_rows(got, expected)
    assert one.get("late_rows_dropped", 0) > 0  # the script does make rows late
    for counter in ("late_rows_dropped", "null_time_rows_dropped", "rows_in", "rows_out"):
        assert two.get(counter, 0) == one.get(counter, 0), counter
    assert 0 < two["pre_aggregated_rows"] < one["rows_in"]


def test_a_grouping_set_copy_counts_once_as_late():
    """Rows copied per grouping set (the last key numbers the copy) are late together but
    counted once, in partials as in rows."""
    config = {
        "window": WINDOWS["tumble"],
        "keys": [["auction", "auction"], ["_e", "_e"]],
        "aggregates": [{"name": "n", "function": "count", "argument": None}],
        "projection": [["auction", "auction"], ["window_end", "window_end"], ["n", "n"]],
        "grouping_sets": {"column": "_e", "count": 2},
    }
    schema = pa.schema([("auction", pa.int64()), ("window_end", pa.timestamp("us")), ("n", pa.int64())])
    base = pa.record_batch({"auction": pa.array([1, 2, 1], pa.int64()),
                            "ts": pa.array([1 * SECOND, 2 * SECOND, 4 * SECOND], pa.timestamp("us"))})
    copies = pa.concat_batches([base.append_column("_e", pa.array([e] * 3, pa.int64())) for e in (0, 1)])
    watermark = 20 * SECOND  # the window [3 s, 13 s) has fired: rows at 4 s are late, 1 and 2 s too
    one = make_window_op(config, schema)
    one.process_watermark(watermark)
    one.process_batch(copies)
    local, owner = make_window_op(config, schema), make_window_op(config, schema)
    owner.process_watermark(watermark)
    owner.process_batch(local.pre_aggregate(copies))
    assert one.ctx.metrics["late_rows_dropped"] == 3
    assert owner.ctx.metrics["late_rows_dropped"] == 3


def test_partials_carry_the_key_groups_of_their_keys():
    config = {**COMBINABLE, "window": WINDOWS["tumble"]}
    op = make_window_op(config, COMBINABLE_SCHEMA, max_parallelism=64)
    batch = random_bids(Rng(7), 500, disorder=SECOND).combine_chunks().to_batches()[0]
    partials = op.pre_aggregate(batch)
    keys = pa.table({"auction": partials.column("__k0"), "kind": partials.column("__k1")})
    assert partials.column(KEY_GROUP_COLUMN).equals(key_groups(keys, ["auction", "kind"], 64))
    # every (key, slice) once: the batch was grouped, not copied
    assert partials.num_rows == len(set(zip(*(partials.column(c).to_pylist() for c in ("__k0", "__k1",
                                                                                         "__slice_start")))))


@pytest.mark.parametrize("change", ["distinct", "late_rows"])
def test_distinct_aggregates_and_late_rows_tables_stay_one_phase(change):
    config = {**COMBINABLE, "window": WINDOWS["tumble"]}
    if change == "distinct":
        config = {**CONFIG, "window": WINDOWS["tumble"]}
        assert not make_window_op(config, SCHEMA).combinable
    else:
        config = {**config, "late_rows": {"0": [["ts", "ts"]]}}
        assert not make_window_op(config, COMBINABLE_SCHEMA).combinable
