"""Keyed state tables in snapshots: Arrow tables with a ``key_group`` column.

Every keyed state table an operator snapshots carries ``key_group`` (an integer
in ``[0, max_parallelism)``, see ``engine.state.key_groups``) and is ordered by
it. That is all rescaling needs: the snapshots of the old subtasks are merged
(``merge_tables``) and each new subtask keeps the key groups it owns
(``select_key_groups``). Restored from a checkpoint, a table is a ``RestoredTable``
(``engine.state.restored``): merging and selecting then narrow what will be read from
the files, and nothing is read until the operator streams it into its state.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.errors import EngineError
from weir.engine.state.restored import RestoredTable
from weir.engine.state.staged import as_table

KEY_GROUP = "key_group"


def _key_group_column(table: pa.Table, name: str) -> pa.ChunkedArray:
    index = table.schema.get_field_index(KEY_GROUP)
    if index < 0:
        raise EngineError(
            f"keyed state table {name!r} has no {KEY_GROUP!r} column",
            hint="every keyed state table carries the key group of each row",
        )
    return table.column(index)


def merge_tables(tables: list, name: str = "?"):
    """One table holding the rows of all ``tables``, ordered by key group (a stable sort).
    Tables restored from files merge without being read (``RestoredTable.concat``)."""
    if len(tables) == 1:
        return tables[0]
    if any(isinstance(t, RestoredTable) for t in tables):
        restored = [t for t in tables if isinstance(t, RestoredTable) or t.num_rows]
        if restored and all(isinstance(t, RestoredTable) for t in restored):
            try:
                return RestoredTable.concat(restored)
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise EngineError(
                    f"the snapshots disagree on the columns of state table {name!r}: {exc}",
                    hint="restore snapshots of one operator, taken with the same job",
                ) from exc
        tables = [as_table(t) for t in tables]
    try:
        merged = pa.concat_tables(tables, promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise EngineError(
            f"the snapshots disagree on the columns of state table {name!r}: {exc}",
            hint="restore snapshots of one operator, taken with the same job",
        ) from exc
    order = pc.sort_indices(_key_group_column(merged, name))
    return merged.take(order)


def select_key_groups(table, key_groups: range, name: str = "?"):
    """The rows of ``table`` whose key group is in ``key_groups`` (in their order)."""
    if isinstance(table, RestoredTable):
        return table.select(key_groups)
    groups = _key_group_column(table, name)
    if table.num_rows == 0:
        return table
    bounds = pc.min_max(groups)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low >= key_groups.start and high < key_groups.stop:
        return table
    keep = pc.and_(
        pc.greater_equal(groups, key_groups.start), pc.less(groups, key_groups.stop)
    )
    return table.filter(keep)


def check_key_groups(table, max_parallelism: int, name: str = "?") -> None:
    """Refuse a table whose key groups do not fit ``max_parallelism`` (a restored table: by the
    key-group index its files recorded; the checkpoint writer refused null key groups)."""
    if isinstance(table, RestoredTable):
        if table.schema.get_field_index(KEY_GROUP) < 0:
            raise EngineError(f"keyed state table {name!r} has no {KEY_GROUP!r} column",
                              hint="every keyed state table carries the key group of each row")
        if table.bounds is None:
            return
        low, high = table.bounds
    else:
        groups = _key_group_column(table, name)
        if groups.null_count:
            raise EngineError(f"state table {name!r} has rows without a key group")
        if table.num_rows == 0:
            return
        bounds = pc.min_max(groups)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low < 0 or high >= max_parallelism:
        raise EngineError(
            f"state table {name!r} holds key group {high if high >= max_parallelism else low}, "
            f"outside [0, {max_parallelism})",
            hint="the state was written with another max parallelism; restore it with that one",
        )


def check_version(state: dict, *, version: int, what: str, operator_id: str | None = None) -> None:
    if state.get("version") != version:
        raise EngineError(f"cannot restore {what} state of version {state.get('version')!r}",
                          hint=f"this operator reads version {version}", operator_id=operator_id)


def merge_snapshots(snapshots: list[dict], *, version: int, what: str) -> dict:
    """The snapshots of several subtasks of one keyed operator as one, for restoring at
    another parallelism: tables merged by key group; the watermark is the minimum, so
    no row that one of the subtasks would still accept is late."""
    if not snapshots:
        raise EngineError(f"no {what} snapshots to merge")
    for snap in snapshots:
        check_version(snap, version=version, what=what)
    max_ps = {snap.get("max_parallelism") for snap in snapshots} - {None}
    if len(max_ps) > 1:
        raise EngineError(f"cannot merge {what} snapshots taken with different max parallelism {sorted(max_ps)}")
    names = sorted({name for snap in snapshots for name in snap["tables"]})
    merged = {
        "version": version,
        "watermark": min(snap["watermark"] for snap in snapshots),
        "tables": {name: merge_tables([_unstaged(s["tables"][name]) for s in snapshots if name in s["tables"]], name)
                   for name in names},
    }
    if max_ps:
        merged["max_parallelism"] = max_ps.pop()
    return merged


def owned_tables(state: dict, *, version: int, max_parallelism: int, key_groups: range, what: str,
                 operator_id: str | None, known: set[str] | None = None) -> dict[str, pa.Table]:
    """A snapshot's tables cut to ``key_groups`` (those a subtask owns), after checking
    its version, that it was written with this max parallelism and belongs to this operator."""
    check_version(state, version=version, what=what, operator_id=operator_id)
    written = state.get("max_parallelism", max_parallelism)
    if written != max_parallelism:
        raise EngineError(
            f"the {what} state was written with max parallelism {written}, this job has {max_parallelism}",
            hint=f"key groups cannot be redistributed across max parallelisms; run the job with "
                 f"max parallelism {written}",
            operator_id=operator_id,
        )
    unknown = set(state["tables"]) - known if known is not None else set()
    if unknown:
        raise EngineError(f"the snapshot holds state tables {sorted(unknown)}, which this {what} does not have",
                          hint="the operator changed since the snapshot was taken", operator_id=operator_id)
    tables = {}
    try:
        for name, table in state["tables"].items():
            table = _unstaged(table)
            check_key_groups(table, max_parallelism, name)
            tables[name] = select_key_groups(table, key_groups, name)
    except EngineError as exc:
        exc.operator_id = exc.operator_id or operator_id
        raise
    return tables


def _unstaged(table):
    """A snapshot's table as Arrow, or as a ``RestoredTable`` (read later, batch by batch)."""
    return table if isinstance(table, RestoredTable) else as_table(table)
