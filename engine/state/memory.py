"""Managed memory: how much of the machine the state tables of one process may use.

Flink gives each TaskManager a share of its memory as *managed memory*
(``taskmanager.memory.managed.size``, or ``taskmanager.memory.managed.fraction``
of the total) and hands RocksDB a slice of it per slot; state beyond it lives on
disk. weir does the same with DuckDB:

1. The total is the memory this process may use, found the way a JVM finds it
   (``-XX:+UseContainerSupport``): the cgroup limit of the process (v2
   ``memory.max``, v1 ``memory.limit_in_bytes``, the lowest along its cgroup
   path), else the physical memory.
2. Managed memory is ``taskmanager.memory.managed.size`` if set, else
   ``taskmanager.memory.managed.fraction`` (default 0.4, Flink's) of the total
   less ``PROCESS_OVERHEAD`` per process of the job (its workers, and at
   parallelism > 1 the coordinator): the interpreter, its libraries and the Arrow
   batches in flight, which live outside DuckDB — as Flink takes its fraction of
   the process memory less JVM overhead and metaspace. At parallelism p each
   worker process gets 1/p of it.
3. Every state connection of the process (``ManagedMemory.connect``) gets an
   equal share as DuckDB's ``memory_limit`` (and a thread per 128 MB of it),
   rebalanced as operators open, and a ``temp_directory`` of its own under the
   job's state directory, so DuckDB spills its state there instead of growing
   past the limit.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from weir.engine.connectors.options import parse_size
from weir.engine.errors import ConnectorOptionError
from weir.engine.state.staged import clear_staging

MANAGED_SIZE = "taskmanager.memory.managed.size"
MANAGED_FRACTION = "taskmanager.memory.managed.fraction"
DEFAULT_FRACTION = 0.4
#: Memory a weir process uses outside DuckDB (measured: ~130 MB once the engine, pyarrow and
#: DuckDB are loaded, ~190 MB while a job runs, with its bounded Arrow batches); the default
#: fraction applies to the limit less this per process.
PROCESS_OVERHEAD = 256 << 20
#: No state connection gets less: DuckDB needs some memory to spill at all.
MIN_CONNECTION_BYTES = 64 << 20
#: A state connection gets one DuckDB thread per this much memory (at least one): with less,
#: DuckDB's spilling sort and aggregate run out of memory for each thread's buffers.
BYTES_PER_THREAD = 128 << 20
#: A cgroup value at least this large means "no limit" (v1 writes 2^63 rounded to a page).
_UNLIMITED = 1 << 60

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _read_limit(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text.isdigit():
        return None  # 'max' (v2: no limit)
    value = int(text)
    return value if value < _UNLIMITED else None


def _cgroup_paths(proc_cgroup: str) -> list[Path]:
    """The memory limit files that apply to this process, from ``/proc/self/cgroup``'s text:
    its own cgroup's and every ancestor's, v2 (``0::/path``) and v1 (``N:memory:/path``)."""
    files = []
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            base, name = CGROUP_ROOT, "memory.max"
            if not (base / "cgroup.controllers").exists():
                base = CGROUP_ROOT / "unified"
        elif "memory" in controllers.split(","):
            base, name = CGROUP_ROOT / "memory", "memory.limit_in_bytes"
        else:
            continue
        here = Path(path)
        for directory in [here, *here.parents]:
            files.append(base / str(directory).lstrip("/") / name)
    return files


def cgroup_memory_limit() -> int | None:
    """The lowest memory limit of this process's cgroups (bytes), or None when there is none."""
    try:
        text = Path("/proc/self/cgroup").read_text()
    except OSError:
        text = ""
    limits = [limit for path in _cgroup_paths(text) if (limit := _read_limit(path)) is not None]
    return min(limits) if limits else None


def physical_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def process_memory_limit() -> int:
    """The memory this process may use: its cgroup limit, else the physical memory."""
    physical = physical_memory()
    limit = cgroup_memory_limit()
    return min(physical, limit) if limit is not None else physical


def parse_fraction(key: str, value: str) -> float:
    try:
        fraction = float(value)
    except ValueError:
        fraction = -1.0
    if not 0.0 < fraction < 1.0:
        raise ConnectorOptionError(f"setting '{key}' must be a fraction between 0 and 1 (exclusive), not '{value}'",
                                   hint=f"write for example '{key}' = '0.4'")
    return fraction


def managed_memory_bytes(settings: dict[str, str], total: int | None = None, *, processes: int = 1) -> int:
    """The job's managed memory: ``taskmanager.memory.managed.size``, else the fraction of
    ``total`` (default: this process's limit) less ``PROCESS_OVERHEAD`` for each of the
    job's ``processes``."""
    size = settings.get(MANAGED_SIZE)
    if size is not None:
        value = parse_size(MANAGED_SIZE, size)
        if value < MIN_CONNECTION_BYTES:
            raise ConnectorOptionError(
                f"setting '{MANAGED_SIZE}' must be at least {MIN_CONNECTION_BYTES >> 20}mb, not '{size}'",
                hint=f"write for example '{MANAGED_SIZE}' = '256mb'")
        return value
    fraction = parse_fraction(MANAGED_FRACTION, settings.get(MANAGED_FRACTION, str(DEFAULT_FRACTION)))
    total = process_memory_limit() if total is None else total
    return int(max(0, total - processes * PROCESS_OVERHEAD) * fraction)


@dataclass
class ManagedMemory:
    """The managed memory of one process, shared by the state connections it opens."""

    #: Bytes for every state connection of this process together.
    total: int
    #: The root of the connections' spill directories (None: DuckDB's default).
    spill_dir: str | None = None
    #: DuckDB threads per connection at most (1 in a parallel worker: one core per subtask).
    max_threads: int = field(default_factory=lambda: os.cpu_count() or 1)
    #: The open connections, each with the most threads it may have.
    _connections: list[tuple[duckdb.DuckDBPyConnection, int]] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def for_job(cls, settings: dict[str, str], *, parallelism: int = 1, spill_dir: str | None = None,
                total: int | None = None) -> "ManagedMemory":
        """This worker's share (1/parallelism) of the job's managed memory."""
        processes = parallelism + 1 if parallelism > 1 else 1  # the workers, and their coordinator
        job = managed_memory_bytes(settings, total, processes=processes)
        return cls(max(MIN_CONNECTION_BYTES, job // max(1, parallelism)),
                   spill_dir, max_threads=1 if parallelism > 1 else (os.cpu_count() or 1))

    def share(self, connections: int) -> int:
        return max(MIN_CONNECTION_BYTES, self.total // max(1, connections))

    def connect(self, operator_id: str, *, preserve_insertion_order: bool = True,
                max_threads: int | None = None) -> duckdb.DuckDBPyConnection:
        """A private in-memory DuckDB database for ``operator_id``'s state, limited to its share
        and spilling to ``<spill_dir>/<operator_id>``, with at most ``max_threads`` threads
        (and never more than this process's ``max_threads``)."""
        connection = duckdb.connect(":memory:")
        connection.execute("SET enable_progress_bar = false")  # a job's output is not DuckDB's to print
        if self.spill_dir:
            clear_staging(self.spill_dir, operator_id)  # snapshot files no checkpoint took
            # DuckDB creates (and on close removes) the operator's own directory, not its parents.
            Path(self.spill_dir).mkdir(parents=True, exist_ok=True)
            connection.execute("SET temp_directory = ?", [str(Path(self.spill_dir) / _safe(operator_id))])
        if not preserve_insertion_order:
            connection.execute("SET preserve_insertion_order = false")
        cap = min(self.max_threads, max_threads or self.max_threads)
        with self._lock:
            self._connections = [(c, t) for c, t in self._connections if _alive(c)] + [(connection, cap)]
            share = self.share(len(self._connections))
            for existing, most in self._connections:
                existing.execute(f"SET memory_limit = '{share}B'")
                existing.execute(f"SET threads = {max(1, min(most, share // BYTES_PER_THREAD))}")
        return connection


def _alive(connection: duckdb.DuckDBPyConnection) -> bool:
    try:
        connection.execute("SELECT 1").fetchall()
    except duckdb.Error:  # closed by an operator that finished: its share is free again
        return False
    return True


def _safe(operator_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in operator_id)
