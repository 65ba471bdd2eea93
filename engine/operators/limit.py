"""Limit: the first ``n`` rows that arrive, then none (Flink's streaming ``LIMIT`` without
ORDER BY over an append-only input).

Config: ``LimitConfig(limit=n)``.

The operator is fed by a hash edge on no key, so every row reaches the one
subtask owning key group 0, in the order its input delivers them. It keeps one
number, the rows it has let through; each batch passes its first
``n - emitted`` rows (a slice, no per-row work) and the rest are dropped. The
output is append-only: a row let through is never taken back.

The count is the state: snapshotted by key group (0) so that a savepoint
restores at any parallelism. The job still runs until its sources end, as in
Flink.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from weir.engine.errors import EngineError
from weir.engine.operators.base import Operator, explain_lines
from weir.engine.operators.config import OperatorConfig

SNAPSHOT_VERSION = 1
#: The key group of the empty key, which every row of the limit's input has.
KEY_GROUP = 0


@dataclass(frozen=True)
class LimitConfig(OperatorConfig):
    #: The rows let through, at most.
    limit: int


class Limit(Operator):
    Config = LimitConfig
    #: State: the rows let through so far, counted against n.
    STATE_CONFIG = ("limit",)
    #: The rows it lets through keep their arrival watermarks (a slice keeps every column).
    arrival_watermark = "pass"
    #: Keyed by no column: one count, so every row goes to one subtask.
    keyed_by = ()
    merges_snapshots = True

    @classmethod
    def explain(cls, config: LimitConfig) -> list[str]:
        return explain_lines("- (one count for the whole stream)",
                             f"the number of rows let through (at most {config.limit})")

    def open(self) -> None:
        if not hasattr(self, "emitted"):
            self.emitted = 0

    def process_batch(self, batch: pa.RecordBatch, input_index: int = 0) -> list[pa.RecordBatch]:
        self.open()
        room = self.config.limit - self.emitted
        if room <= 0 or batch.num_rows == 0:
            return []
        kept = batch.slice(0, room)
        self.emitted += kept.num_rows
        return [kept]

    def snapshot(self) -> dict[str, Any]:
        self.open()
        return {"version": SNAPSHOT_VERSION, "emitted": {str(KEY_GROUP): self.emitted} if self.emitted else {}}

    @staticmethod
    def merge_snapshots(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
        emitted: dict[str, int] = {}
        for snap in snapshots:
            for group, count in _checked(snap)["emitted"].items():
                emitted[group] = emitted.get(group, 0) + count
        return {"version": SNAPSHOT_VERSION, "emitted": emitted}

    def restore(self, state: dict[str, Any]) -> None:
        owned = self.ctx.owned_key_groups()
        self.emitted = sum(count for group, count in _checked(state)["emitted"].items() if int(group) in owned)


def _checked(state: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(state, dict) or state.get("version") != SNAPSHOT_VERSION:
        raise EngineError("the limit's snapshot has an unknown format",
                          hint="restore with the weir version that took the checkpoint")
    return state
