"""From one parsed sqlglot tree to one of weir's statements (``sql.statements``)."""
from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from weir.sql import statements as st
from weir.sql.dialect import (CreateFunctionStatement, DropFunctionStatement, ExplainStatement, ResetStatement,
                              MetadataColumn, StopJobStatement)
from weir.sql.errors import Problem, WeirSqlError
from weir.sql.positions import error_at, line_col, position
from weir.sql.windows import normalise_windows

SUPPORTED = (
    "CREATE TABLE, CREATE [MATERIALIZED] VIEW, INSERT INTO ... SELECT, SELECT, EXPLAIN, SET, RESET, "
    "SHOW TABLES|VIEWS|JOBS|FUNCTIONS|CATALOGS|DATABASES|CREATE TABLE, DESCRIBE, DROP TABLE|VIEW, STOP JOB, CREATE|DROP [TEMPORARY [SYSTEM]] FUNCTION"
)


@dataclass
class Span:
    """Where a statement stands: ``text[start:end]`` of the whole text."""

    text: str
    start: int
    end: int

    def fields(self) -> dict:
        line, col = line_col(self.text, self.start)
        return {"line": line, "col": col, "text": self.text[self.start : self.end]}


def build_statement(tree: exp.Expr, span: Span) -> st.Statement:
    for kind, build in BUILDERS:
        if isinstance(tree, kind):
            return build(tree, span)
    raise _unsupported(_statement_kind(tree), span)


def _unsupported(kind: str, span: Span, hint: str = f"weir runs {SUPPORTED}") -> WeirSqlError:
    line, col = line_col(span.text, span.start)
    return WeirSqlError(Problem(f"{kind} statements are not supported", line=line, col=col, hint=hint))


def _statement_kind(tree: exp.Expr) -> str:
    """UPDATE, DELETE, ...; for a statement sqlglot keeps as text, its first word (two for SHOW, ALTER...)."""
    if not isinstance(tree, exp.Command):
        return tree.key.upper()
    words = f"{tree.name} {tree.args.get('expression') or ''}".upper().split()
    return " ".join(words[:2] if words[0] in ("SHOW", "CREATE", "DROP", "ALTER") else words[:1])


def _name(table: exp.Expr) -> str:
    """The dotted name as written, without quotes."""
    if isinstance(table, exp.Schema):
        table = table.this
    return ".".join(part.name for part in table.parts) if isinstance(table, exp.Table) else table.name


def _query(tree: exp.Expr | None, statement: str) -> exp.Query:
    if not isinstance(tree, exp.Query):
        found = tree.key.upper() if tree is not None else "nothing"
        raise error_at(tree, f"{statement} needs a query, got {found}", f"write {statement} ... SELECT ... FROM ...")
    return normalise_windows(tree)


# -- CREATE -------------------------------------------------------------------------------


def _create(tree: exp.Create, span: Span) -> st.Statement:
    kind = (tree.args.get("kind") or "").upper()
    if kind == "TABLE":
        return _create_table(tree, span)
    if kind == "VIEW":
        return _create_view(tree, span)
    raise _unsupported(f"CREATE {kind}", span)


def _create_table(tree: exp.Create, span: Span) -> st.CreateTable:
    schema = tree.this
    if tree.expression is not None or not isinstance(schema, exp.Schema):
        raise error_at(
            tree.this,
            f"CREATE TABLE {_name(schema)} needs its columns",
            f"declare the columns and a connector: CREATE TABLE {_name(schema)} (id BIGINT, ts TIMESTAMP(3)) "
            "WITH ('connector' = '...'), then INSERT INTO it",
        )
    _reject_replace(tree)
    columns, primary_key, watermarks = [], [], []
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            column, is_key = _column(item)
            columns.append(column)
            primary_key += [column.name] if is_key else []
        elif isinstance(item, exp.WatermarkColumnConstraint):
            watermarks.append(item)
        elif isinstance(item, exp.PrimaryKey):
            primary_key += [key.name for key in item.expressions]
        else:
            raise error_at(item, f"{item.sql(dialect='weir')} is not supported in CREATE TABLE", "declare columns, one WATERMARK FOR and a PRIMARY KEY")
    return st.CreateTable(
        **span.fields(),
        name=_name(schema),
        columns=columns,
        watermark=_watermark(watermarks, columns),
        options=_options(tree),
        primary_key=primary_key,
        if_not_exists=bool(tree.args.get("exists")),
    )


def _column(definition: exp.ColumnDef) -> tuple[st.ColumnDef, bool]:
    """The column, and whether it is declared PRIMARY KEY."""
    name = definition.name
    line, col = position(definition)
    computed = [c.args["kind"] for c in definition.constraints if isinstance(c.args.get("kind"), exp.ComputedColumnConstraint)]
    if computed:  # v2 AS v * 2, ts AS TO_TIMESTAMP(s), pt AS PROCTIME()
        others = [c for c in definition.constraints if not isinstance(c.args.get("kind"), exp.ComputedColumnConstraint)]
        if definition.args.get("kind") is not None or others or computed[0].args.get("persisted"):
            raise error_at(definition, f"the computed column {name} takes no type or constraint",
                           f"write {name} AS <expression>; its type is the expression's (CAST it to choose one)")
        return st.ColumnDef(name=name, type=None, line=line, col=col, computed=computed[0].this), False
    if definition.args.get("kind") is None:
        raise error_at(definition, f"column {name} needs a type", f"e.g. {name} BIGINT, or a computed column {name} AS <expression>")
    nullable, is_key, metadata = True, False, None
    for constraint in definition.constraints:
        kind = constraint.args.get("kind")
        if isinstance(kind, MetadataColumn):
            metadata = kind.this.name if kind.this is not None else name
        elif isinstance(kind, exp.NotNullColumnConstraint):
            nullable = bool(kind.args.get("allow_null"))
        elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
            is_key, nullable = True, False
        else:
            raise error_at(constraint, f"the constraint {constraint.sql(dialect='weir')} on column {name} is not supported", "use NOT NULL or PRIMARY KEY NOT ENFORCED")
    return st.ColumnDef(name=name, type=definition.args["kind"], line=line, col=col, nullable=nullable,
                        metadata=metadata), is_key


def _watermark(watermarks: list[exp.WatermarkColumnConstraint], columns: list[st.ColumnDef]) -> st.WatermarkDef | None:
    if not watermarks:
        return None
    if len(watermarks) > 1:
        raise error_at(watermarks[1], "a table can have one WATERMARK", "keep a single WATERMARK FOR <time column> AS ...")
    watermark = watermarks[0]
    column = watermark.this.name
    if column not in {c.name for c in columns}:
        raise error_at(
            watermark.this,
            f"WATERMARK FOR {column}: the table has no column {column}",
            f"name one of the table's TIMESTAMP columns: {', '.join(c.name for c in columns)}",
        )
    line, col = position(watermark)
    return st.WatermarkDef(column=column, expression=watermark.expression, line=line, col=col)


def _options(tree: exp.Create) -> dict[str, str]:
    options: dict[str, str] = {}
    properties = tree.args.get("properties")
    for item in properties.expressions if properties else []:
        if isinstance(item, exp.TemporaryProperty):
            continue
        if isinstance(item, exp.PartitionedByProperty):
            raise error_at(item, "PARTITIONED BY is not supported yet",
                           "leave it out: weir's filesystem sink writes every row's partition columns into "
                           "its part files")
        if not isinstance(item, exp.Property):
            raise error_at(item, f"{item.sql(dialect='weir')} is not supported in CREATE TABLE", "give options as WITH ('key' = 'value', ...)")
        key = item.this.name if isinstance(item.this, exp.Literal) else item.this.sql(dialect="weir")
        if key in options:
            raise error_at(item, f"the option '{key}' is given twice", "give each option once")
        value = item.args.get("value")
        options[key] = value.name if isinstance(value, (exp.Literal, exp.Var, exp.Identifier)) else value.sql(dialect="weir")
    return options


def _reject_replace(tree: exp.Create) -> None:
    if tree.args.get("replace"):
        raise error_at(tree.this, "CREATE OR REPLACE is not supported", f"DROP {tree.args['kind']} {_name(tree.this)} first")


def _create_view(tree: exp.Create, span: Span) -> st.CreateView:
    _reject_replace(tree)
    if isinstance(tree.this, exp.Schema):
        raise error_at(tree.this.expressions[0], "a column list on a view is not supported", "name the columns with AS in the SELECT")
    properties = tree.args.get("properties")
    materialized = any(isinstance(p, exp.MaterializedProperty) for p in (properties.expressions if properties else []))
    kind = "MATERIALIZED VIEW" if materialized else "VIEW"
    return st.CreateView(
        **span.fields(),
        name=_name(tree.this),
        query=_query(tree.expression, f"CREATE {kind} {_name(tree.this)} AS"),
        materialized=materialized,
        if_not_exists=bool(tree.args.get("exists")),
    )


# -- INSERT, SELECT, EXPLAIN --------------------------------------------------------------


def _insert(tree: exp.Insert, span: Span) -> st.Insert:
    target = tree.this
    if tree.args.get("overwrite"):
        raise error_at(target, "INSERT OVERWRITE is not supported", "use INSERT INTO")
    columns = [c.name for c in target.expressions] if isinstance(target, exp.Schema) else None
    return st.Insert(**span.fields(), table=_name(target), columns=columns, query=_query(tree.expression, f"INSERT INTO {_name(target)}"))


def _select(tree: exp.Query, span: Span) -> st.Select:
    return st.Select(**span.fields(), query=normalise_windows(tree))


def _explain(tree: ExplainStatement, span: Span) -> st.Explain:
    # The dialect marks an EXPLAIN with where the explained statement begins.
    inner = Span(span.text, tree.meta.get("start", span.start), span.end)
    return st.Explain(**span.fields(), statement=build_statement(tree.this, inner))


# -- SET, RESET, SHOW, DESCRIBE, DROP, STOP JOB -------------------------------------------


def _text(e: exp.Expr) -> str:
    """An option key or value as written: 'a.b' and a.b both give a.b."""
    if isinstance(e, exp.Boolean):
        return "true" if e.this else "false"
    return e.name if isinstance(e, (exp.Literal, exp.Var, exp.Identifier)) else e.sql(dialect="weir")


def _set(tree: exp.Set, span: Span) -> st.SetOption:
    items = tree.expressions
    if not items:
        return st.SetOption(**span.fields(), key=None, value=None)
    assignment = items[0].this
    if len(items) > 1 or not isinstance(assignment, exp.EQ) or items[0].args.get("kind"):
        raise error_at(items[-1], "SET takes one 'key' = 'value'", "write SET 'key' = 'value'; one SET per option")
    return st.SetOption(**span.fields(), key=_text(assignment.this), value=_text(assignment.expression))


def _reset(tree: ResetStatement, span: Span) -> st.ResetOption:
    key = tree.this
    return st.ResetOption(**span.fields(), key=key.name if key is not None else None)


def _show(tree: exp.Show, span: Span) -> st.Show:
    target = tree.args.get("target")
    return st.Show(**span.fields(), what=tree.name, name=_name(target) if target is not None else None)


def _describe(tree: exp.Describe, span: Span) -> st.Describe:
    return st.Describe(**span.fields(), name=_name(tree.this))


def _drop(tree: exp.Drop, span: Span) -> st.Drop:
    kind = (tree.args.get("kind") or "").upper()
    tables = tree.args.get("tables") or [tree.this]
    if kind not in ("TABLE", "VIEW"):
        raise _unsupported(f"DROP {kind}", span, "weir drops tables and views: DROP TABLE|VIEW [IF EXISTS] name")
    if len(tables) != 1:
        raise error_at(tables[1], f"DROP {kind} takes one name", f"write one DROP {kind} per {kind.lower()}")
    return st.Drop(**span.fields(), kind=kind, name=_name(tables[0]), if_exists=bool(tree.args.get("exists")))


def _create_function(tree: CreateFunctionStatement, span: Span) -> st.CreateFunction:
    language = tree.args.get("language") or "PYTHON"  # weir's functions are Python (Flink's default is JAVA)
    if language != "PYTHON":
        raise error_at(tree.this, f"LANGUAGE {language} is not supported: weir runs Python functions",
                       "write LANGUAGE PYTHON, naming a function decorated with @weir.udf")
    return st.CreateFunction(**span.fields(), name=_name(tree.this), target=tree.expression.name, language=language,
                             temporary=bool(tree.args.get("temporary")), system=bool(tree.args.get("system")),
                             if_not_exists=bool(tree.args.get("exists")))


def _drop_function(tree: DropFunctionStatement, span: Span) -> st.DropFunction:
    return st.DropFunction(**span.fields(), name=_name(tree.this), temporary=bool(tree.args.get("temporary")),
                           system=bool(tree.args.get("system")), if_exists=bool(tree.args.get("exists")))


def _stop_job(tree: StopJobStatement, span: Span) -> st.StopJob:
    return st.StopJob(**span.fields(), job_id=tree.this.name, with_savepoint=bool(tree.args.get("with_savepoint")))


BUILDERS = (
    (exp.Create, _create),
    (exp.Insert, _insert),
    (exp.Query, _select),
    (ExplainStatement, _explain),
    (exp.Set, _set),
    (ResetStatement, _reset),
    (exp.Show, _show),
    (exp.Describe, _describe),
    (exp.Drop, _drop),
    (StopJobStatement, _stop_job),
    (CreateFunctionStatement, _create_function),
    (DropFunctionStatement, _drop_function),
)
