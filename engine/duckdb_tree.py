"""DuckDB's own parse tree of a SELECT, and back to SQL text: the engine reads and rewrites the
expressions the planner generated without a parser of its own (``json_serialize_sql`` gives the
tree as JSON, ``json_deserialize_sql`` writes a tree back), so that string literals, quoted names,
comments and lambdas are DuckDB's to read. Used to catch UDF calls row by row
(``engine.udfs.catching``) and to evaluate them over whole batches (``engine.operators.python_calls``).
"""
from __future__ import annotations

import copy
import json
from typing import Any

import duckdb


#: The position DuckDB gives a node that has none in the text.
NO_LOCATION = 2**64 - 1


class UnparsedSql(ValueError):
    """A statement DuckDB does not parse (its message says why)."""


def parse(con: duckdb.DuckDBPyConnection, sql: str) -> dict:
    """The JSON tree of ``sql`` (its ``statements``); UnparsedSql when DuckDB cannot parse it."""
    tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()[0][0])
    if tree.get("error"):
        raise UnparsedSql(tree.get("error_message") or "DuckDB did not parse the statement")
    return tree


def write(con: duckdb.DuckDBPyConnection, tree: dict) -> str:
    """The SQL text of a tree ``parse`` gave (possibly rewritten)."""
    return con.execute("SELECT json_deserialize_sql(?)", [json.dumps(tree)]).fetchall()[0][0]


def select_node(tree: dict) -> dict:
    """The SELECT node of a parsed one-statement tree."""
    return tree["statements"][0]["node"]


def expression(con: duckdb.DuckDBPyConnection, sql: str) -> dict:
    """The tree of the expression ``sql`` (a column reference, a star: a template to copy)."""
    return select_node(parse(con, f"SELECT {sql}"))["select_list"][0]


def quote(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def cast(con: duckdb.DuckDBPyConnection, node: dict, sql_type: str) -> dict:
    """``CAST(<node> AS <sql_type>)``."""
    template = expression(con, f"CAST(NULL AS {sql_type})")
    return {**template, "child": node}


def arguments(node: dict) -> list[dict]:
    """The argument expressions of a FUNCTION node (DuckDB 2.0 names its arguments; before, children)."""
    if "arguments" in node:
        return [argument["expression"] for argument in node["arguments"]]
    return list(node.get("children", []))


def set_argument(node: dict, index: int, value: dict) -> None:
    if "arguments" in node:
        node["arguments"][index] = {**node["arguments"][index], "expression": value}
    else:
        node["children"][index] = value


def conjunction(parts: list[dict]) -> dict | None:
    """``parts`` joined by AND (None for none; the one part alone)."""
    if len(parts) <= 1:
        return parts[0] if parts else None
    return {"class": "CONJUNCTION", "type": "CONJUNCTION_AND", "alias": "", "query_location": NO_LOCATION,
            "children": list(parts)}


def conjuncts(node: dict | None) -> list[dict]:
    """A condition's top-level AND terms, in the order written."""
    if node is None:
        return []
    if node.get("class") == "CONJUNCTION" and node.get("type") == "CONJUNCTION_AND":
        return [part for child in node["children"] for part in conjuncts(child)]
    return [node]


def without_locations(node: Any) -> Any:
    """``node`` without its positions in the text: two equal expressions compare equal."""
    if isinstance(node, list):
        return [without_locations(item) for item in node]
    if isinstance(node, dict):
        return {k: without_locations(v) for k, v in node.items() if not k.startswith("query_location")}
    return node


def copied(tree: dict) -> dict:
    return copy.deepcopy(tree)
