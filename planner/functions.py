"""Flink's SQL functions, rewritten into DuckDB's.

sqlglot reads a function with the meaning of the dialect it parses with;
here each Flink function whose meaning differs in DuckDB is rewritten, so
the engine computes what a Flink user expects. ``/`` between two integers is
integer division, truncating toward zero, as in Flink and Java.
"""
from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from engine.sql_eval import INPUT, describe

_JAVA_PATTERNS = [
    ("yyyy", "%Y"), ("yy", "%y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"),
    ("mm", "%M"), ("ss", "%S"), ("SSS", "%g"), ("EEE", "%a"),
]


def java_to_strftime(pattern: str) -> str:
    """A Java (SimpleDateFormat) pattern, as Flink's DATE_FORMAT takes, as strftime."""
    out, i = [], 0
    while i < len(pattern):
        for java, c in _JAVA_PATTERNS:
            if pattern.startswith(java, i):
                out.append(c)
                i += len(java)
                break
        else:
            out.append(pattern[i].replace("%", "%%"))
            i += 1
    return "".join(out)


def _fn(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def _unit(node: exp.Expression) -> str:
    return node.name.lower()


def _cast(node: exp.Expression, to: str) -> exp.Expression:
    return exp.Cast(this=node, to=exp.DataType.build(to))


def _anonymous(node: exp.Anonymous) -> exp.Expression:
    name, args = node.name.upper(), node.expressions
    if name == "PROCTIME" and not args:  # processing time, as a TIMESTAMP(3) without a zone
        return _fn("current_localtimestamp")
    if name == "DATE_FORMAT" and len(args) == 2 and isinstance(args[1], exp.Literal):
        return _fn("strftime", args[0], exp.Literal.string(java_to_strftime(args[1].this)))
    if name == "TIMESTAMPADD" and len(args) == 3:
        unit, count, ts = args
        return exp.Add(this=ts, expression=exp.Mul(this=exp.Paren(this=count),
                                                   expression=exp.Interval(this=exp.Literal.string("1"),
                                                                           unit=exp.var(unit.name.upper()))))
    if name == "FROM_UNIXTIME" and args:
        pattern = java_to_strftime(args[1].this) if len(args) > 1 else "%Y-%m-%d %H:%M:%S"
        seconds = _fn("make_timestamp", exp.Mul(this=exp.Paren(this=args[0]), expression=exp.Literal.number(1_000_000)))
        return _fn("strftime", seconds, exp.Literal.string(pattern))
    if name == "UNIX_TIMESTAMP":
        if not args:
            return _cast(_fn("epoch", exp.CurrentTimestamp()), "BIGINT")
        ts = (_fn("strptime", args[0], exp.Literal.string(java_to_strftime(args[1].this)))
              if len(args) > 1 else _cast(args[0], "TIMESTAMP"))
        return _cast(_fn("epoch", ts), "BIGINT")
    if name == "SPLIT_INDEX" and len(args) == 3:
        return _fn("list_extract", _fn("string_split", args[0], args[1]),
                   exp.Add(this=exp.Paren(this=args[2]), expression=exp.Literal.number(1)))
    return node


def translate(node: exp.Expression) -> exp.Expression:
    """Rewrite one node (use with ``Expression.transform``)."""
    if isinstance(node, exp.Anonymous):
        return _anonymous(node)
    if isinstance(node, exp.UnixToTime) and not node.args.get("scale") and not node.args.get("format"):
        return _cast(node.this, "TIMESTAMP")  # Flink's TO_TIMESTAMP(string)
    if isinstance(node, exp.StrToDate) and node.args.get("format") is None:
        return _cast(node.this, "DATE")  # Flink's TO_DATE(string)
    if isinstance(node, exp.Floor) and node.args.get("to") is not None:
        return _fn("date_trunc", exp.Literal.string(_unit(node.args["to"])), node.this)
    if isinstance(node, exp.Ceil) and node.args.get("to") is not None:
        unit = _unit(node.args["to"])
        floor = _fn("date_trunc", exp.Literal.string(unit), node.this)
        up = exp.Add(this=floor.copy(), expression=exp.Interval(this=exp.Literal.string("1"), unit=exp.var(unit.upper())))
        return exp.If(this=exp.EQ(this=floor, expression=node.this.copy()), true=node.this.copy(), false=up)
    if isinstance(node, exp.TimestampDiff):
        # Flink's TIMESTAMPDIFF(unit, t1, t2) reaches here as (this=unit, expression=t1, unit=t2).
        unit, start, end = node.this, node.expression, node.args.get("unit")
        return _fn("date_sub", exp.Literal.string(unit.name.lower()), start, exp.column(end.name) if isinstance(end, exp.Var) else end)
    if isinstance(node, exp.RegexpReplace) and node.args.get("modifiers") is None:
        return _fn("regexp_replace", node.this, node.expression, node.args["replacement"], exp.Literal.string("g"))
    if isinstance(node, exp.RegexpExtract):
        # Flink gives NULL when the pattern does not match; DuckDB's regexp_extract gives ''.
        group = node.args.get("position") or node.args.get("group")
        args = [node.this, node.expression] + ([group] if group is not None else [])
        matches = _fn("regexp_matches", node.this.copy(), node.expression.copy())
        return exp.If(this=matches, true=_fn("regexp_extract", *args), false=exp.Null())
    return node


def integer_division(tree: exp.Expression, schema: pa.Schema) -> exp.Expression:
    """Turn ``a / b`` into integer division where both sides are integers, innermost first."""
    pending = list(tree.find_all(exp.Div))
    while pending:
        ready = [d for d in pending if not any(inner in pending for inner in d.find_all(exp.Div) if inner is not d)]
        columns = []
        for i, div in enumerate(ready):
            columns += [f"{div.this.sql(dialect='duckdb')} AS l{i}", f"{div.expression.sql(dialect='duckdb')} AS r{i}"]
        types = describe(f"SELECT {', '.join(columns)} FROM {INPUT}", schema)
        for i, div in enumerate(ready):
            if pa.types.is_integer(types.field(f"l{i}").type) and pa.types.is_integer(types.field(f"r{i}").type):
                replacement = exp.IntDiv(this=div.this, expression=div.expression)
                if div is tree:
                    tree = replacement
                else:
                    div.replace(replacement)
            pending.remove(div)
    return tree
