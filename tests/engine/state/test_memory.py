"""Managed memory: the limit found like a JVM finds it, and shared by the state connections."""
from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from weir.engine.errors import EngineError
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.window_aggregate import WindowAggregate
from weir.engine.state import memory
from weir.engine.state.memory import ManagedMemory, cgroup_memory_limit, managed_memory_bytes

MB = 1 << 20


def setting(con: duckdb.DuckDBPyConnection, name: str):
    return con.sql(f"SELECT current_setting('{name}')").fetchall()[0][0]


def limit_bytes(con: duckdb.DuckDBPyConnection) -> int:
    """DuckDB's memory_limit in bytes (it reports '64.0 MiB')."""
    number, unit = setting(con, "memory_limit").split()
    return int(float(number) * {"KiB": 1 << 10, "MiB": MB, "GiB": 1 << 30}[unit])


def fake_cgroups(tmp_path, monkeypatch, proc_cgroup: str, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    monkeypatch.setattr(memory, "CGROUP_ROOT", tmp_path)
    real_path = memory.Path

    def fake_path(*parts):
        return tmp_path / "proc-self-cgroup" if parts == ("/proc/self/cgroup",) else real_path(*parts)

    (tmp_path / "proc-self-cgroup").write_text(proc_cgroup)
    monkeypatch.setattr(memory, "Path", fake_path)


def test_cgroup_v1_limit_is_the_lowest_along_the_process_path(tmp_path, monkeypatch):
    fake_cgroups(tmp_path, monkeypatch, "4:memory:/jobs/weir\n3:cpu:/\n", {
        "memory/jobs/weir/memory.limit_in_bytes": str(700 * MB),
        "memory/jobs/memory.limit_in_bytes": str(900 * MB),
        "memory/memory.limit_in_bytes": "9223372036854771712",  # v1's "no limit"
    })
    assert cgroup_memory_limit() == 700 * MB


def test_cgroup_v2_memory_max_and_max_meaning_no_limit(tmp_path, monkeypatch):
    fake_cgroups(tmp_path, monkeypatch, "0::/user.slice/job\n", {
        "cgroup.controllers": "memory cpu",
        "user.slice/job/memory.max": "max",
        "user.slice/memory.max": str(2048 * MB),
    })
    assert cgroup_memory_limit() == 2048 * MB


def test_no_cgroup_limit_means_physical_memory(tmp_path, monkeypatch):
    fake_cgroups(tmp_path, monkeypatch, "0::/\n", {"cgroup.controllers": "memory", "memory.max": "max"})
    assert cgroup_memory_limit() is None
    assert memory.process_memory_limit() == memory.physical_memory()


def test_managed_memory_is_the_size_else_the_fraction_of_the_limit_less_each_process_overhead():
    assert managed_memory_bytes({"taskmanager.memory.managed.size": "256mb"}, total=1 << 40) == 256 * MB
    # Flink's default fraction, 0.4, of what the process leaves: 1000 MB less 256 MB outside DuckDB
    assert managed_memory_bytes({}, total=1000 * MB) == int(744 * MB * 0.4)
    assert managed_memory_bytes({"taskmanager.memory.managed.fraction": "0.25"}, total=1256 * MB) == 250 * MB
    # two workers and their coordinator each keep their overhead; nothing is left under 768 MB
    assert managed_memory_bytes({}, total=1768 * MB, processes=3) == 400 * MB
    assert managed_memory_bytes({}, total=700 * MB, processes=3) == 0
    with pytest.raises(EngineError, match="taskmanager.memory.managed.fraction"):
        managed_memory_bytes({"taskmanager.memory.managed.fraction": "1.2"}, total=1000 * MB)


def test_each_worker_gets_its_share_of_the_job_and_one_thread():
    worker = ManagedMemory.for_job({"taskmanager.memory.managed.size": "1gb"}, parallelism=4)
    assert (worker.total, worker.max_threads) == (256 * MB, 1)
    # by default: 0.4 of the limit less 5 processes' overhead, then a quarter; never below 64 MB
    worker = ManagedMemory.for_job({}, parallelism=4, total=5 * 256 * MB + 1000 * MB)
    assert worker.total == int(1000 * MB * 0.4) // 4
    assert ManagedMemory.for_job({}, parallelism=4, total=512 * MB).total == 64 * MB


def test_memory_limit_and_temp_directory_reach_duckdb(tmp_path):
    managed = ManagedMemory(512 * MB, spill_dir=str(tmp_path / "spill"), max_threads=4)
    first = managed.connect("q.window_aggregate")
    assert limit_bytes(first) == 512 * MB and setting(first, "threads") == 4  # a thread per 128 MB
    assert setting(first, "temp_directory") == str(tmp_path / "spill" / "q.window_aggregate")
    assert setting(first, "enable_progress_bar") is False
    second = managed.connect("q.group_aggregate")  # two operators share the memory: each gets half
    assert limit_bytes(first) == limit_bytes(second) == 256 * MB
    assert setting(first, "threads") == setting(second, "threads") == 2
    second.close()  # a closed connection's share goes back to the others when the next one opens
    third = managed.connect("q.top_n")
    assert limit_bytes(first) == limit_bytes(third) == 256 * MB
    assert setting(third, "temp_directory").endswith("q.top_n")


def test_an_operator_state_connection_is_limited_and_spills_beyond_it(tmp_path):
    ctx = OperatorContext("q.window_aggregate", pa.schema([]), memory=ManagedMemory(64 * MB, str(tmp_path)))
    con = ctx.state_connection(preserve_insertion_order=False)
    assert limit_bytes(con) == 64 * MB and setting(con, "preserve_insertion_order") is False
    assert setting(con, "threads") == 1
    # ~200 MB of rows in a 64 MB database: DuckDB writes what does not fit to the temp directory.
    con.execute("CREATE TABLE state AS SELECT i, repeat('x', 180) AS payload FROM range(1000000) t(i)")
    (spilled,) = con.sql("SELECT coalesce(sum(size), 0) FROM duckdb_temporary_files()").fetchall()[0]
    assert spilled > 0
    assert con.sql("SELECT count(*), sum(i) FROM state").fetchall() == [(1_000_000, 499_999_500_000)]


def test_the_window_aggregate_asks_for_a_state_without_insertion_order(tmp_path):
    ctx = OperatorContext("q.window_aggregate", pa.schema([("k", pa.int64()), ("n", pa.int64())]),
                          memory=ManagedMemory(128 * MB, str(tmp_path)))
    op = WindowAggregate({"window": {"kind": "tumble", "time_column": "ts", "size": 10_000_000, "offset": 0},
                          "keys": [["k", "k"]], "aggregates": [], "projection": [["k", "k"]]}, ctx)
    op.open()
    assert setting(op.state.con, "preserve_insertion_order") is False
    assert limit_bytes(op.state.con) == 128 * MB
    assert setting(op.state.con, "threads") == 1  # its statements are too small to share out
    op.close()


def test_a_connection_capped_at_one_thread_keeps_it_when_the_others_are_set_again(tmp_path):
    managed = ManagedMemory(512 * MB, spill_dir=str(tmp_path / "spill"), max_threads=4)
    capped = managed.connect("q.window_aggregate", max_threads=1)
    assert setting(capped, "threads") == 1
    other = managed.connect("q.group_aggregate")  # every connection is set again: the cap holds
    assert setting(capped, "threads") == 1 and setting(other, "threads") == 2
    assert limit_bytes(capped) == limit_bytes(other) == 256 * MB


def test_the_memory_backend_neither_spills_nor_shares():
    ctx = OperatorContext("q.top_n", pa.schema([]), state_backend="memory")
    assert setting(ctx.state_connection(), "temp_directory") == ""
