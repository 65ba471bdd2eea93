"""Where a word sits inside a statement's text, for problems about things the
parsed statement keeps no position for: a WITH option, a SET key, an INSERT's
target table."""
from __future__ import annotations

import re

from weir.sql.statements import Statement


def locate(statement: Statement, pattern: str, *, after: str | None = None) -> tuple[int, int]:
    """Line and column of the first match of the regular expression ``pattern`` in the
    statement's text (searched after the first match of ``after``, if given),
    or of the statement itself when there is none."""
    text, start = statement.text, 0
    if after is not None:
        found = re.search(after, text, re.IGNORECASE)
        start = found.end() if found else 0
    match = re.compile(pattern, re.IGNORECASE).search(text, start)
    if match is None:
        return statement.line, statement.col
    offset = match.start()
    newlines = text.count("\n", 0, offset)
    if newlines == 0:
        return statement.line, statement.col + offset
    return statement.line + newlines, offset - text.rfind("\n", 0, offset)


def quoted(word: str) -> str:
    """A pattern for ``word`` written as a SQL string literal."""
    return "'" + re.escape(word) + "'"


def name(word: str) -> str:
    """A pattern for ``word`` written as an identifier, bare or quoted."""
    return r"(?<![\w.])[`\"]?" + re.escape(word) + r"[`\"]?(?![\w.])"
