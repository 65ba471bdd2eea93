"""Tab completion at the prompt, by where the cursor is in the statement:

- after FROM, JOIN, INTO, TABLE, DESCRIBE, VIEW: table and view names;
- after ``name.``: the columns of that table (or of the table an alias names);
- in a WITH (...) clause: the option keys of the statement's connector, and
  after `'connector' =` the connector names;
- after SET: setting keys, and the values of the result mode;
- elsewhere: the columns of the tables the statement names, functions (DuckDB's, Flink's and
  the session's UDFs: ``Session.function_names``) and keywords.
"""
from __future__ import annotations

import re
from typing import Callable, Iterable

from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.document import Document

from weir.engine.connectors.registry import CONNECTORS
from weir.planner.settings import SETTINGS
from weir.shell.live import RESULT_CONNECTOR
from weir.shell.splitter import split
from weir.shell.vocabulary import FUNCTIONS, KEYWORDS, SHELL_COMMANDS

TABLE_CONTEXT = {"FROM", "JOIN", "INTO", "TABLE", "DESCRIBE", "DESC", "VIEW", "EXISTS"}
RESULT_MODES = ("table", "changelog", "tableau")

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPEN_STRING = re.compile(r"'((?:[^']|'')*)$")
_CONNECTOR = re.compile(r"'connector'\s*=\s*'([^']*)'", re.I)
_FORMAT = re.compile(r"'format'\s*=\s*'([^']*)'", re.I)
_ALIAS = re.compile(r"\b(?:FROM|JOIN|TABLE)\s+([A-Za-z_]\w*)(?:\s+(?:AS\s+)?([A-Za-z_]\w*))?", re.I)


class SqlCompleter(Completer):
    def __init__(self, tables: Callable[[], dict[str, list[str]]],
                 functions: Callable[[], Iterable[str]] | None = None):
        #: Every readable table and view, with its columns (asked anew on each completion).
        self.tables = tables
        #: Every function a query may call (``Session.function_names``: DuckDB's, Flink's, the UDFs).
        self.functions = functions

    def get_completions(self, document: Document, complete_event) -> Iterable[Completion]:
        functions = self.functions() if self.functions is not None else FUNCTIONS
        yield from completions(_current_statement(document.text_before_cursor), self.tables(), functions)


def _current_statement(text: str) -> str:
    """What was typed of the statement the cursor is in (after the last `;`)."""
    chunks = split(text + " x")  # a trailing word, so that an empty last statement still counts
    if not chunks:
        return ""
    last = chunks[-1]
    return text[last.start:] if last.start < len(text) else ""


def completions(statement: str, tables: dict[str, list[str]], functions: Iterable[str] = FUNCTIONS) -> list[Completion]:
    string = _OPEN_STRING.search(statement)
    if string is not None and statement.count("'") % 2 == 1:
        return _in_string(statement[: string.start()], string.group(1))
    match = re.search(r"([A-Za-z_]\w*)\.(\w*)$", statement)
    if match is not None:
        return _columns_of(match.group(1), match.group(2), statement, tables)
    partial = re.search(r"\w*$", statement).group()
    before = statement[: len(statement) - len(partial)]
    previous = _WORD.findall(before)
    last_word = previous[-1].upper() if previous else ""
    after_keyword = last_word in TABLE_CONTEXT and before.rstrip().endswith(previous[-1])
    if after_keyword or re.search(r"\bTUMBLE\(\s*$", before, re.I):
        return _matching(partial, sorted(tables), "table")
    named = [t for t in tables if re.search(rf"\b{re.escape(t)}\b", statement, re.I)]
    columns = sorted({c for t in (named or tables) for c in tables[t]})
    words = [*(Completion(c, -len(partial), display_meta="column") for c in columns if _starts(c, partial))]
    if not previous:
        words += _matching(partial, SHELL_COMMANDS, "command", upper=True)
    words += _matching(partial, KEYWORDS, "keyword", upper=True)
    words += _matching(partial, functions, "function", upper=True)
    words += [] if named else _matching(partial, sorted(tables), "table")
    return words


def _in_string(before: str, partial: str) -> list[Completion]:
    """Completion inside a quoted string: an option key or value, or a setting."""
    head = before.rstrip()
    if re.search(r"\bSET\s*$", head, re.I):
        return _quoted(partial, sorted(SETTINGS), "setting")
    if re.search(r"'sql-client\.execution\.result-mode'\s*=\s*$", head, re.I):
        return _quoted(partial, RESULT_MODES, "result mode")
    if re.search(r"'connector'\s*=\s*$", head, re.I):
        return _quoted(partial, sorted(n for n in CONNECTORS if n != RESULT_CONNECTOR), "connector")
    in_with = re.search(r"\bWITH\s*\((?:[^()]|'[^']*')*$", before, re.I)
    if in_with and (head.endswith("(") or head.endswith(",")):
        return _quoted(partial, _option_keys(before), "option")
    return []


def _option_keys(statement: str) -> list[str]:
    connector = _CONNECTOR.search(statement)
    spec = CONNECTORS.get(connector.group(1)) if connector else None
    if spec is None:
        return ["connector"]
    fmt = _FORMAT.search(statement)
    keys = list(spec.options)
    for name, by_format in spec.format_options.items():
        if fmt is None or fmt.group(1) == name:
            keys.extend(by_format)
    written = {m.lower() for m in re.findall(r"'([^']*)'\s*=", statement)}
    return [k for k in keys if k.lower() not in written]


def _columns_of(qualifier: str, partial: str, statement: str, tables: dict[str, list[str]]) -> list[Completion]:
    by_name = {t.lower(): t for t in tables}
    table = by_name.get(qualifier.lower())
    if table is None:
        for name, alias in _ALIAS.findall(statement):
            if alias and alias.lower() == qualifier.lower():
                table = by_name.get(name.lower())
    if table is None:
        return []
    return _matching(partial, tables[table], "column")


def _starts(word: str, partial: str) -> bool:
    return word.lower().startswith(partial.lower())


def _matching(partial: str, words: Iterable[str], meta: str, upper: bool = False) -> list[Completion]:
    lower = upper and partial != "" and partial == partial.lower()
    return [Completion(w.lower() if lower else w, -len(partial), display_meta=meta)
            for w in words if _starts(w, partial)]


def _quoted(partial: str, words: Iterable[str], meta: str) -> list[Completion]:
    return [Completion(w + "'", -len(partial), display=w, display_meta=meta) for w in words if _starts(w, partial)]
