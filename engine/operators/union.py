"""Union: UNION ALL of several append-only inputs.

Config: ``UnionConfig(inputs=n)``. Every input already has the output's column types
(the planner casts where the inputs' types differ, before the union); the
union renames each batch's columns to the output's names and passes it on.
It keeps no state. Its watermark is the minimum of its inputs' watermarks,
which the executor computes for every operator with several inputs. The rows'
arrival watermarks (``engine.watermarks.ARRIVAL_WATERMARK``) pass on with them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from weir.engine.errors import EngineError
from weir.engine.operators.base import Operator, OperatorContext, explain_lines
from weir.engine.operators.config import OperatorConfig
from weir.engine.watermarks import ARRIVAL_FIELD, PASS, has_arrival


@dataclass(frozen=True)
class UnionConfig(OperatorConfig):
    #: How many inputs the union reads.
    inputs: int = 2


class Union(Operator):
    Config = UnionConfig
    arrival_watermark = PASS

    @classmethod
    def explain(cls, config: UnionConfig) -> list[str]:
        return explain_lines("-", "none")

    def __init__(self, config: UnionConfig | dict[str, Any], ctx: OperatorContext):
        super().__init__(config, ctx)
        self.inputs = int(self.config.inputs)

    def process_batch(self, batch: pa.RecordBatch, input_index: int = 0) -> list[pa.RecordBatch]:
        schema = self.ctx.output_schema
        if has_arrival(batch):
            schema = schema.append(ARRIVAL_FIELD)
        if not 0 <= input_index < self.inputs:
            raise EngineError(f"union has {self.inputs} inputs, got a batch on input {input_index}",
                              operator_id=self.ctx.operator_id)
        if batch.num_columns != len(schema):
            raise EngineError(f"union input {input_index} has {batch.num_columns} columns, the union "
                              f"{len(schema)}: {schema.names}", operator_id=self.ctx.operator_id)
        if batch.num_rows == 0:
            return []
        if batch.schema.equals(schema):
            return [batch]
        try:
            return [pa.RecordBatch.from_arrays([c.cast(f.type) for c, f in zip(batch.columns, schema)],
                                               schema=schema)]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise EngineError(f"union input {input_index} does not fit the union's columns: {exc}",
                              hint=f"input: {batch.schema}; union: {schema}",
                              operator_id=self.ctx.operator_id) from exc
