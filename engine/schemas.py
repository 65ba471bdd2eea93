"""Arrow schemas as JSON-able text (a JobGraph's output schemas, a join side's input schema).

Below both the JobGraph (``engine.graph``) and the operators that read a schema from their
config, so that the graph can ask the operator classes (``engine.operators.registry``) what a
node is without a circle."""
from __future__ import annotations

import base64

import pyarrow as pa


def schema_to_json(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def schema_from_json(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))
