"""Just enough of a SQL file's text for the differential harness: statements,
the tables they declare and the INSERTs that fill them.

Standard library only: both the harness (weir's Python) and the Flink job
(PyFlink's Python) import it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field


def statements(text: str) -> list[str]:
    """The statements of ``text``, split at `;` outside quotes and comments,
    without their `--` comments (block comments, and so hints, are kept)."""
    out, current, i, n = [], [], 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"`":
            j = i + 1
            while j < n:
                if text[j] == c and j + 1 < n and text[j + 1] == c:
                    j += 2
                    continue
                if text[j] == c:
                    break
                j += 1
            current.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            current.append(text[i:j])
            i = j
        elif c == ";":
            out.append("".join(current).strip())
            current = []
            i += 1
        else:
            current.append(c)
            i += 1
    out.append("".join(current).strip())
    return [s for s in out if s]


@dataclass
class TableDecl:
    name: str
    columns: list[tuple[str, str | None]]  # (name, declared type); None for a computed column
    options: dict[str, str] = field(default_factory=dict)


@dataclass
class Insert:
    target: str
    columns: list[str] | None
    query: str


_CREATE = re.compile(r"^\s*CREATE\s+(?:TEMPORARY\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([`\w.]+)\s*\(",
                     re.I | re.S)
_INSERT = re.compile(r"^\s*INSERT\s+INTO\s+([`\w.]+)\s*(\(([^()]*)\))?\s*(.*)$", re.I | re.S)
_OPTION = re.compile(r"'((?:[^']|'')*)'\s*=\s*'((?:[^']|'')*)'", re.S)
_NOT_COLUMN = re.compile(r"^\s*(WATERMARK|PRIMARY|CONSTRAINT|UNIQUE)\b", re.I)


def _unquote(name: str) -> str:
    return name.strip().strip("`").split(".")[-1]


def _closing(text: str, start: int) -> int:
    """The index of the `)` closing the `(` at ``start``."""
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c == "'":
            i = text.index("'", i + 1)
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError("unbalanced parentheses in CREATE TABLE")


def _top_level_split(body: str) -> list[str]:
    parts, depth, current = [], 0, []
    for c in body:
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def create_table(statement: str) -> TableDecl | None:
    m = _CREATE.match(statement)
    if not m:
        return None
    open_at = m.end() - 1
    close_at = _closing(statement, open_at)
    columns: list[tuple[str, str | None]] = []
    for part in _top_level_split(statement[open_at + 1:close_at]):
        if _NOT_COLUMN.match(part):
            continue
        cm = re.match(r"^(`[^`]+`|\w+)\s+(.*)$", part, re.S)
        if not cm:
            continue
        name, rest = _unquote(cm.group(1)), cm.group(2).strip()
        if re.match(r"^AS\b", rest, re.I):
            columns.append((name, None))
            continue
        rest = re.sub(r"\s+(NOT\s+NULL|NULL|METADATA\b.*|COMMENT\b.*)$", "", rest, flags=re.I | re.S)
        columns.append((name, " ".join(rest.split())))
    tail = statement[close_at + 1:]
    options = {k.replace("''", "'"): v.replace("''", "'") for k, v in _OPTION.findall(tail)}
    return TableDecl(_unquote(m.group(1)), columns, options)


def insert(statement: str) -> Insert | None:
    m = _INSERT.match(statement)
    if not m:
        return None
    columns = [_unquote(c) for c in m.group(3).split(",")] if m.group(2) else None
    return Insert(_unquote(m.group(1)), columns, m.group(4).strip())


def set_statement(statement: str) -> tuple[str, str] | None:
    m = re.match(r"^\s*SET\s+'([^']*)'\s*=\s*'([^']*)'\s*$", statement, re.I | re.S)
    return (m.group(1), m.group(2)) if m else None
