"""Where a node or token sits in the text given to ``sql.parse``, and problems located there.

The dialect parses the whole text at once, so every token's offsets, and the
positions sqlglot copies from tokens into a node's ``meta``, are offsets into
the whole text.
"""
from __future__ import annotations

from sqlglot import exp

from weir.sql.errors import Problem, WeirSqlError


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of ``offset`` in ``text``."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _start_of(meta: dict) -> tuple[int, int, int] | None:
    """(offset, line, col) of the first character of the token recorded in ``meta``.

    sqlglot records a token's line and its *last* column; a token on one line starts
    ``end - start`` columns earlier.
    """
    if "start" not in meta:
        return None
    return meta["start"], meta["line"], meta["col"] - (meta["end"] - meta["start"])


def position(node: exp.Expr | None) -> tuple[int | None, int | None]:
    """Line and column of the earliest token that ``node`` (or any node under it) came from."""
    starts = [start for n in (node.walk() if node is not None else ()) if n._meta and (start := _start_of(n.meta))]
    if not starts:
        return None, None
    _, line, col = min(starts)
    return line, col


def operator_position(node: exp.Expr) -> tuple[int | None, int | None]:
    """Line and column of a binary operator itself (``+`` in ``a + b``), else where the node starts."""
    if node._meta and "operator" in node.meta:
        return node.meta["operator"]
    return position(node)


def problem_at(node: exp.Expr | None, message: str, hint: str | None = None) -> Problem:
    line, col = position(node)
    return Problem(message, line=line, col=col, hint=hint)


def error_at(node: exp.Expr | None, message: str, hint: str | None = None) -> WeirSqlError:
    return WeirSqlError(problem_at(node, message, hint))
