"""The normalised statements that sql.parse() returns and the planner consumes.

Queries stay sqlglot expressions. Every window spelling (Flink's
``TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size))``, RisingWave's
``TUMBLE(t, ts, size)``, the legacy ``GROUP BY TUMBLE(ts, size)``) becomes one
``WindowTVF`` node in the FROM clause.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp


class WindowTVF(exp.Expression):
    """A windowing table function in FROM.

    this:          the input relation (exp.Table, possibly aliased, or exp.Subquery)
    kind:          'TUMBLE' | 'HOP' | 'CUMULATE' | 'SESSION'
    time_col:      exp.Column naming the time attribute
    size:          exp.Interval (TUMBLE, HOP, CUMULATE)
    slide:         exp.Interval (HOP)
    step:          exp.Interval (CUMULATE)
    gap:           exp.Interval (SESSION)
    offset:        exp.Interval, optional
    partition_by:  list of exp.Column (SESSION), optional
    alias:         exp.TableAlias, optional
    The window adds columns window_start, window_end, window_time.
    """

    arg_types = {
        "this": True,
        "kind": True,
        "time_col": True,
        "size": False,
        "slide": False,
        "step": False,
        "gap": False,
        "offset": False,
        "partition_by": False,
        "alias": False,
    }

    @property
    def kind(self) -> str:
        return self.args["kind"]


@dataclass
class Statement:
    #: 1-based line and column of the statement's first token in the parsed text.
    line: int
    col: int
    #: The statement's own text, as written.
    text: str


@dataclass
class ColumnDef:
    name: str
    #: None for a computed column (its type is its expression's).
    type: exp.DataType | None
    line: int
    col: int
    nullable: bool = True
    #: ``name AS expression``: a computed column, evaluated over the physical columns as rows are read.
    computed: exp.Expression | None = None
    #: ``METADATA [FROM 'key']``: the metadata key the connector fills it from.
    metadata: str | None = None


@dataclass
class WatermarkDef:
    column: str
    #: The watermark expression, e.g. date_time - INTERVAL '2' SECOND.
    expression: exp.Expression
    line: int
    col: int


@dataclass
class CreateTable(Statement):
    name: str
    columns: list[ColumnDef]
    watermark: WatermarkDef | None
    #: WITH ('k' = 'v') options, keys as written, values as strings.
    options: dict[str, str]
    primary_key: list[str] = field(default_factory=list)
    if_not_exists: bool = False


@dataclass
class CreateView(Statement):
    name: str
    query: exp.Query
    materialized: bool = False
    if_not_exists: bool = False


@dataclass
class Insert(Statement):
    table: str
    columns: list[str] | None
    query: exp.Query


@dataclass
class Select(Statement):
    """A bare query."""

    query: exp.Query


@dataclass
class SetOption(Statement):
    """SET 'key' = 'value'; a bare SET (key None) lists what is set."""

    key: str | None
    value: str | None


@dataclass
class ResetOption(Statement):
    key: str | None  # None: RESET all


@dataclass
class Explain(Statement):
    statement: Statement


@dataclass
class Show(Statement):
    what: str  # 'TABLES' | 'VIEWS' | 'JOBS' | 'FUNCTIONS' | 'CATALOGS' | 'CREATE TABLE' | ...
    name: str | None = None  # SHOW CREATE TABLE|VIEW's table or view


@dataclass
class Describe(Statement):
    name: str


@dataclass
class Drop(Statement):
    kind: str  # 'TABLE' | 'VIEW'
    name: str
    if_exists: bool = False


@dataclass
class StopJob(Statement):
    job_id: str
    with_savepoint: bool = False


@dataclass
class CreateFunction(Statement):
    """CREATE [TEMPORARY [SYSTEM]] FUNCTION [IF NOT EXISTS] name AS 'module.function' [LANGUAGE PYTHON]."""

    name: str
    #: 'package.module.function', as written.
    target: str
    language: str = "PYTHON"
    temporary: bool = False
    system: bool = False
    if_not_exists: bool = False


@dataclass
class DropFunction(Statement):
    name: str
    temporary: bool = False
    system: bool = False
    if_exists: bool = False
