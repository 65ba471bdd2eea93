"""Which rows a subtask of a parallel job processes.

weir's parallel executor runs subtask i of every operator in worker i, and
every worker reads every split of every source — the same batches in the
same order, so the watermarks are the same everywhere and a job's output
does not depend on its parallelism. Work is divided after the read:

- a hash edge (and every edge into a keyed, stateful operator) keeps the
  rows whose key group subtask i owns: keyed state is partitioned by key group;
- where rows that no hash edge has divided yet (``replicated`` rows, identical
  in every worker) flow into operators that no keyed operator depends on, the
  edge keeps the batches of every p-th source step, so that each row is
  processed and written once.

Reading costs one pass per worker; there is no traffic between workers. A
distributed executor (a later issue) would exchange rows between machines
instead; the JobGraph is the same.
"""
from __future__ import annotations

from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import EngineError
from engine.graph import JobGraph, OperatorNode
from engine.state.key_groups import subtasks

#: Operators whose state is keyed: they see only their key groups' rows.
KEYED_KINDS = frozenset({"window_aggregate", "window_join", "window_rank", "session_window", "group_aggregate",
                         "interval_join", "over_aggregate", "stream_join", "temporal_join", "top_n"})
#: A node's rows are divided by different keys on different inputs (a union of such inputs).
MIXED = ("<rows divided by several keys>",)

Selector = Callable[[pa.RecordBatch, int], pa.RecordBatch | None]


def replicated_nodes(graph: JobGraph) -> set[str]:
    """Operators whose output is the same in every worker (no hash edge or keyed state upstream)."""
    out: set[str] = set()
    for node in graph.nodes:
        if node.kind == "source" or (
            node.kind not in KEYED_KINDS
            and node.inputs
            and all(e.partitioning != "hash" and e.source in out for e in node.inputs)
        ):
            out.add(node.id)
    return out


def _needs_every_row(graph: JobGraph) -> set[str]:
    """Operators that must see every replicated row: keyed ones and those feeding them."""
    out: set[str] = set()
    for node in reversed(graph.nodes):
        consumers = [(c, e) for c in graph.nodes for e in c.inputs if e.source == node.id]
        if node.kind in KEYED_KINDS or any(
            e.partitioning == "hash" or c.id in out for c, e in consumers
        ):
            out.add(node.id)
    return out


def _partition_keys(graph: JobGraph) -> dict[str, tuple[str, ...] | None]:
    """How each operator's output is divided among workers: None where every worker
    has all of it (replicated), else the key columns of the key groups it is divided by."""
    out: dict[str, tuple[str, ...] | None] = {}
    for node in graph.nodes:
        hashed = [e for e in node.inputs if e.partitioning == "hash"]
        if node.kind == "source":
            out[node.id] = None
        elif node.kind in KEYED_KINDS:
            out[node.id] = tuple(hashed[0].keys) if hashed else ()
        else:  # a union: divided as its divided inputs are (replicated inputs follow any division)
            divisions = {out[e.source] for e in node.inputs} - {None}
            out[node.id] = divisions.pop() if len(divisions) == 1 else (MIXED if divisions else None)
    return out


def check_no_repartitioning(graph: JobGraph, parallelism: int) -> None:
    """Workers exchange no rows: a keyed operator fed by rows that an upstream keyed operator
    divided by other keys would miss the rows held by other workers. Refuse it."""
    divided = _partition_keys(graph)
    for node in graph.nodes:
        for edge in node.inputs:
            if edge.partitioning != "hash" and node.kind not in KEYED_KINDS:
                continue
            upstream = divided[edge.source]
            keys = tuple(edge.keys) if edge.partitioning == "hash" else ()
            if upstream is not None and upstream != keys:
                raise EngineError(
                    f"operator {node.id} groups by ({', '.join(keys) or 'nothing'}) rows that "
                    f"{edge.source} divided among workers by ({', '.join(upstream) or 'nothing'}); "
                    f"at parallelism {parallelism} that needs an exchange between workers, which weir's "
                    "parallel executor does not have yet",
                    hint="run this job at parallelism 1, or group both operators by the same keys",
                    operator_id=node.id,
                )


def selectors(graph: JobGraph, subtask: int, parallelism: int,
              max_parallelism: int) -> dict[tuple[str, int], Selector]:
    """(consumer id, input index) -> what that input keeps, for edges that divide work."""
    if parallelism == 1:
        return {}
    check_no_repartitioning(graph, parallelism)
    replicated = replicated_nodes(graph)
    needs_all = _needs_every_row(graph)
    kinds = {n.id: n.kind for n in graph.nodes}
    chosen: dict[tuple[str, int], Selector] = {}
    for node in graph.nodes:
        for index, edge in enumerate(node.inputs):
            if edge.partitioning == "hash" or node.kind in KEYED_KINDS:
                keys = list(edge.keys) if edge.partitioning == "hash" else []
                chosen[(node.id, index)] = _by_key_group(keys, subtask, parallelism, max_parallelism)
            elif (edge.source in replicated and node.id not in needs_all
                  and (kinds[edge.source] == "source" or edge.source in needs_all)):
                chosen[(node.id, index)] = _by_step(subtask, parallelism)
    return chosen


def _by_key_group(keys: list[str], subtask: int, parallelism: int, max_parallelism: int) -> Selector:
    def select(batch: pa.RecordBatch, step: int) -> pa.RecordBatch:
        return batch.filter(pc.equal(subtasks(batch, keys, parallelism, max_parallelism), subtask))

    return select


def _by_step(subtask: int, parallelism: int) -> Selector:
    def select(batch: pa.RecordBatch, step: int) -> pa.RecordBatch | None:
        return batch if step % parallelism == subtask else None

    return select


def keyed(node: OperatorNode) -> bool:
    return node.kind in KEYED_KINDS
