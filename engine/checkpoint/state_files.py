"""One subtask's snapshot on disk: its tables as Parquet files sorted by key group,
the rest as JSON.

Layout under a checkpoint directory, one folder per operator subtask::

    <operator>/subtask-<n>/state.json          the snapshot without "tables"
    <operator>/subtask-<n>/<table>.parquet     one file per state table (zstd), rows
                                               sorted by key_group

``<operator>`` and ``<table>`` are the ids made safe as file names (characters
outside ``[A-Za-z0-9_.-]`` become ``_`` and a short hash of the original is added,
so two ids never share a name).

The handle recorded for a subtask (JSON-able)::

    {"files": [{"path", "sha256", "bytes"}, ...],      every file, for verification
     "state": "<operator>/subtask-<n>/state.json",
     "tables": {name: {"path", "rows", "key_groups": [first, last] or null}}}

``key_groups`` is the key-group index: the smallest and largest key group in the
file, so that a reader restoring a key-group range skips files outside it. Rows
are sorted by key group, so the rows of a range are one contiguous slice.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from weir.engine.checkpoint.errors import CheckpointError
from weir.engine.state.restored import Part, RestoredTable
from weir.engine.state.staged import StagedTable
from weir.engine.checkpoint.files import (
    FileProblem,
    check_size,
    fsync_directory,
    make_directories,
    open_input,
    resolve,
    verify_file,
    move_file,
    read_verified,
    write_file,
)
from weir.engine.checkpoint.location import Location, RemotePath
from weir.engine.checkpoint.staging import move_staged

KEY_GROUP = "key_group"
STATE_FILE = "state.json"
PARQUET_COMPRESSION = "zstd"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def safe_name(name: str) -> str:
    """``name`` usable as one file name; distinct names stay distinct."""
    cleaned = _UNSAFE.sub("_", name)
    if cleaned != name or cleaned.startswith((".", "_")) or not cleaned:
        cleaned = f"{cleaned.lstrip('._')}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    return cleaned


def subtask_directory(operator_id: str, subtask: int) -> str:
    return f"{safe_name(operator_id)}/subtask-{subtask}"


# -- writing -----------------------------------------------------------------
def write_subtask_state(root: Location, operator_id: str, subtask: int, state: Any) -> dict[str, Any]:
    """Write one subtask's snapshot under ``root``; every file and its folder fsynced."""
    directory = subtask_directory(operator_id, subtask)
    make_directories(root / directory)
    tables = state.get("tables") if isinstance(state, dict) else None
    rest = {k: v for k, v in state.items() if k != "tables"} if isinstance(state, dict) else state
    if tables is not None and not isinstance(tables, dict):
        raise CheckpointError(
            f"the snapshot's 'tables' is a {type(tables).__name__}, not a dict of tables",
            operator_id=operator_id,
        )
    try:
        text = json.dumps(rest, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise CheckpointError(
            f"the snapshot of subtask {subtask} is not JSON-able apart from its tables: {e}",
            hint="an operator's snapshot holds JSON values and, under 'tables', pyarrow Tables",
            operator_id=operator_id,
        ) from e
    state_entry = write_file(root, f"{directory}/{STATE_FILE}", text.encode())
    handle: dict[str, Any] = {"files": [state_entry], "state": state_entry["path"]}
    if tables is not None:
        handle["tables"] = {}
        used: set[str] = set()
        for name, table in tables.items():
            file_name = safe_name(str(name))
            if file_name in used:  # only if a name collides with another's safe form
                file_name = f"{file_name}-{len(used)}"
            used.add(file_name)
            relative = f"{directory}/{file_name}.parquet"
            if isinstance(table, StagedTable) and table.sha256 is not None:  # uploaded by its worker
                entry = move_staged(root, relative, table)
                index = {"rows": table.rows, "key_groups": list(table.key_groups) if table.key_groups else None}
            elif isinstance(table, StagedTable):  # written at snapshot time (too large for memory)
                entry = move_file(root, relative, Path(table.path))
                index = {"rows": table.rows, "key_groups": list(table.key_groups) if table.key_groups else None}
            else:
                data, index = encode_table(table, operator_id, name)
                entry = write_file(root, relative, data)
            handle["files"].append(entry)
            handle["tables"][name] = {"path": entry["path"], **index}
    fsync_directory(root / directory)
    return handle


def encode_table(table: Any, operator_id: str, name: str) -> tuple[pa.Buffer, dict[str, Any]]:
    """``table`` as Parquet bytes with rows sorted by key group, and its key-group index."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if not isinstance(table, pa.Table):
        raise CheckpointError(
            f"state table {name!r} is a {type(table).__name__}, not a pyarrow Table",
            operator_id=operator_id,
        )
    if KEY_GROUP not in table.column_names:
        raise CheckpointError(
            f"state table {name!r} has no {KEY_GROUP!r} column",
            hint="every keyed state table carries key_group = hash(keys) % max_parallelism",
            operator_id=operator_id,
        )
    key_groups = table.column(KEY_GROUP)
    if not pa.types.is_integer(key_groups.type) or key_groups.null_count:
        raise CheckpointError(
            f"state table {name!r}: {KEY_GROUP!r} must be a non-null integer column, "
            f"not {key_groups.type} with {key_groups.null_count} nulls",
            operator_id=operator_id,
        )
    index: dict[str, Any] = {"rows": table.num_rows, "key_groups": None}
    if table.num_rows:
        if not _is_sorted(key_groups):
            table = table.take(pc.sort_indices(key_groups))  # a stable sort
        bounds = pc.min_max(key_groups)
        index["key_groups"] = [bounds["min"].as_py(), bounds["max"].as_py()]
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression=PARQUET_COMPRESSION)
    return sink.getvalue(), index


def _is_sorted(values: pa.ChunkedArray) -> bool:
    if len(values) < 2:
        return True
    values = values.combine_chunks()
    return pc.all(pc.less_equal(values.slice(0, len(values) - 1), values.slice(1))).as_py()


# -- reading -----------------------------------------------------------------
def read_subtask_state(root: Location, handle: dict[str, Any], key_groups: range | None, *,
                       stream: bool = False) -> Any:
    """The snapshot a handle describes, tables filtered to ``key_groups`` (None: all).

    With ``stream`` a table is a ``RestoredTable``: its file is verified (read in chunks) and
    then read only when the operator restoring it scans it, batch by batch, skipping the
    row groups outside ``key_groups`` — the snapshot is never whole in memory. Without, a
    table is read whole into Arrow and cut (tests, tools).

    Raises ``FileProblem`` for a file that is not what was written."""
    entries = {entry["path"]: entry for entry in handle["files"]}
    state = json.loads(read_verified(root, _entry(entries, handle["state"])))
    if "tables" not in handle:
        return state
    tables = {}
    for name, table in handle["tables"].items():
        entry = _entry(entries, table["path"])
        if key_groups is not None and not _overlaps(table["key_groups"], key_groups):
            tables[name] = _read_schema(check_size(root, entry), table["path"]).empty_table()
            continue
        if stream:
            verify_file(root, entry)
            path = resolve(root, table["path"])
            bounds = tuple(table["key_groups"]) if table["key_groups"] else None
            part = Part(path.path, bounds, path.filesystem) if isinstance(path, RemotePath) else Part(str(path), bounds)
            restored = RestoredTable([part], _read_schema(path, table["path"]))
            tables[name] = restored if key_groups is None else restored.select(key_groups)
            continue
        data = _read_parquet(read_verified(root, entry), table["path"])
        tables[name] = data if key_groups is None else filter_key_groups(data, key_groups)
    return {**state, "tables": tables}


def _entry(entries: dict[str, Any], path: str) -> Any:
    if path not in entries:
        raise FileProblem(f"file {path!r} is referenced but not listed with a checksum")
    return entries[path]


def _read_parquet(data: bytes, relative: str) -> pa.Table:
    try:
        return pq.read_table(pa.py_buffer(data))
    except (pa.ArrowException, OSError) as e:
        raise FileProblem(f"file {relative!r} is not readable Parquet: {e}") from e


def _read_schema(path: Location, relative: str) -> pa.Schema:
    try:
        with open_input(path) as f:
            return pq.read_schema(f)
    except (pa.ArrowException, OSError) as e:
        raise FileProblem(f"file {relative!r} is not readable Parquet: {e}") from e


def _overlaps(bounds: list[int] | None, key_groups: range) -> bool:
    if bounds is None or len(key_groups) == 0:
        return False
    first, last = bounds
    if key_groups.step == 1:
        return key_groups.start <= last and first < key_groups.stop
    return any(first <= g <= last for g in key_groups)


def filter_key_groups(table: pa.Table, key_groups: range) -> pa.Table:
    """The rows of ``table`` (sorted by key group) whose key group is in ``key_groups``."""
    column = table.column(KEY_GROUP)
    if key_groups.step != 1:
        return table.filter(pc.is_in(column, pa.array(list(key_groups), column.type)))
    if len(key_groups) == 0:
        return table.slice(0, 0)
    # Sorted rows: the range is the slice between the counts of smaller key groups.
    start = pc.sum(pc.less(column, key_groups.start)).as_py() or 0
    stop = pc.sum(pc.less(column, key_groups.stop)).as_py() or 0
    return table.slice(start, stop - start)
