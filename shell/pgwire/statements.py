"""What a Postgres client's statement is, and who answers it.

``classify(sql)`` looks at the first words only (no parser on the hot path):

- reads (SELECT, WITH, VALUES, TABLE, FROM ...) go to DuckDB over the result
  database, after DuckDB's own parser has checked that each is a SELECT;
- weir's statements (SHOW JOBS / TABLES / VIEWS / [USER] FUNCTIONS / CATALOGS /
  DATABASES / CURRENT CATALOG / CREATE TABLE t / CREATE VIEW v, EXPLAIN; and, when writes are
  allowed, CREATE, INSERT INTO, DROP, STOP JOB, SET 'key' = 'value') go to the
  weir session, as the shell answers them;
- ``SUBSCRIBE [TO] view``, ``SUBSCRIBE (SELECT ...)`` and ``COPY (SUBSCRIBE ...) TO
  STDOUT`` stream a view's committed changes;
- what clients send on connect — SET / SHOW / RESET of a Postgres setting,
  BEGIN / COMMIT / ROLLBACK, DISCARD, DEALLOCATE — is answered here, changing
  nothing but this connection's settings.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

READ, WEIR_READ, WEIR_WRITE, SUBSCRIBE, COPY_SUBSCRIBE, TRANSACTION, SET, SHOW, NO_OP, EMPTY = (
    "read", "weir read", "weir write", "subscribe", "copy subscribe", "transaction", "set", "show", "no-op", "empty")

_COMMENTS = re.compile(r"\s*(--[^\n]*(\n|$)|/\*.*?\*/)", re.S)
_WORDS = re.compile(r"[A-Za-z_]+|'|\(|\*")
_READ_WORDS = {"select", "with", "values", "table", "from", "(", "describe", "desc", "summarize"}
#: SHOW's second word for weir's (Flink's) SHOW statements; any other SHOW names a Postgres setting.
_WEIR_SHOW = {"jobs", "tables", "views", "functions", "user", "catalogs", "databases", "current", "create"}
_WEIR_WRITE_WORDS = {"create", "insert", "drop", "stop"}
_TRANSACTION_WORDS = {"begin", "start", "commit", "end", "rollback", "abort", "savepoint", "release"}
_NO_OP_WORDS = {"discard", "deallocate", "listen", "unlisten", "close"}


@dataclass(frozen=True)
class Statement:
    sql: str
    kind: str
    words: list[str] = field(default_factory=list)

    @property
    def tag(self) -> str:
        """The CommandComplete tag of a statement that returns no rows."""
        word = self.words[0].upper() if self.words else ""
        return {"END": "COMMIT", "ABORT": "ROLLBACK", "START": "BEGIN", "DESC": "DESCRIBE"}.get(word, word)


def strip_comments(sql: str) -> str:
    text = sql
    while True:
        match = _COMMENTS.match(text)
        if not match:
            return text.strip()
        text = text[match.end():]


@functools.lru_cache(maxsize=4096)  # a client sends the same texts again and again; Statement is never changed
def classify(sql: str) -> Statement:
    text = strip_comments(sql).rstrip(";").strip()
    words = [w.lower() for w in _WORDS.findall(text[:200])[:4]]
    first = words[0] if words else ""
    second = words[1] if len(words) > 1 else ""
    if not text:
        kind = EMPTY
    elif first in _READ_WORDS:
        kind = READ
    elif first == "subscribe":
        kind = SUBSCRIBE
    elif first == "copy" and second == "(" and len(words) > 2 and words[2] == "subscribe":
        kind = COPY_SUBSCRIBE
    elif first in _TRANSACTION_WORDS:
        kind = TRANSACTION
    elif first in ("set", "reset"):
        quoted = second == "'" or (second in ("session", "local") and len(words) > 2 and words[2] == "'")
        kind = WEIR_WRITE if quoted or (first == "reset" and not second) else SET
    elif first == "show":
        kind = WEIR_READ if second in _WEIR_SHOW else SHOW
    elif first == "explain":
        kind = WEIR_READ
    elif first in _WEIR_WRITE_WORDS:
        kind = WEIR_WRITE
    elif first in _NO_OP_WORDS:
        kind = NO_OP
    else:
        kind = READ  # DuckDB's parser decides, and refuses what is not a SELECT
    return Statement(text, kind, words)


# -- the Postgres settings a client sees -------------------------------------------------
def server_parameters(version: str) -> dict[str, str]:
    """What ParameterStatus reports at connect, and SHOW answers."""
    return {
        "server_version": f"15.0 (weir {version})",
        "server_version_num": "150000",
        "server_encoding": "UTF8",
        "client_encoding": "UTF8",
        "DateStyle": "ISO, MDY",
        "IntervalStyle": "postgres",
        "TimeZone": "UTC",
        "integer_datetimes": "on",
        "standard_conforming_strings": "on",
        "is_superuser": "off",
        "application_name": "",
        "default_transaction_read_only": "on",
        "transaction_read_only": "on",
        "transaction_isolation": "read committed",
        "default_transaction_isolation": "read committed",
        "search_path": '"$user", public',
        "max_identifier_length": "63",
        "extra_float_digits": "1",
        "statement_timeout": "0",
        "lc_messages": "C",
    }


#: ParameterStatus is sent at connect for these (the ones Postgres reports).
REPORTED = ("server_version", "server_encoding", "client_encoding", "DateStyle", "IntervalStyle", "TimeZone",
            "integer_datetimes", "standard_conforming_strings", "is_superuser", "application_name",
            "default_transaction_read_only")

_SET = re.compile(r"set\s+(?:session\s+|local\s+)?([A-Za-z_][\w.]*)\s*(?:=|\bto\b)\s*(.*)$", re.I | re.S)
_SET_TIME_ZONE = re.compile(r"set\s+(?:session\s+|local\s+)?time\s+zone\s+(.*)$", re.I | re.S)


def parse_set(sql: str) -> tuple[str, str] | None:
    """(name, value) of ``SET name = value`` / ``SET name TO value`` / ``SET TIME ZONE value``;
    None for a SET this does not read (SET SESSION CHARACTERISTICS ...), answered as a no-op."""
    match = _SET_TIME_ZONE.match(sql)
    if match:
        return "TimeZone", _unquote(match.group(1))
    match = _SET.match(sql)
    if not match:
        return None
    return match.group(1), _unquote(match.group(2))


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value


def parse_show(sql: str) -> str:
    parts = sql.split(None, 1)
    return parts[1].strip().strip('"') if len(parts) > 1 else ""


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|min|h)?\s*$", re.I)


def timeout_seconds(value: str) -> float | None:
    """``statement_timeout`` as Postgres reads it (a bare number is milliseconds); 0 is none."""
    match = _DURATION.match(value)
    if not match:
        return None
    amount = float(match.group(1))
    return amount * {"ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0}[(match.group(2) or "ms").lower()]
