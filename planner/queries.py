"""Planning a query into operators: sources, calcs and window aggregates.

A query is planned bottom-up into ``Stream``s. What this planner accepts
today: one relation in FROM (a table, a view, a subquery, or a window table
function over one of those), WHERE, projections, and GROUP BY over a window.
"""
from __future__ import annotations

import difflib

import duckdb
import pyarrow as pa
from sqlglot import exp

from weir.engine.changelog import ROW_KIND, ROW_KIND_TYPE
from weir.engine.connectors.options import parse_size
from weir.engine.graph import Edge
from weir.engine.operators.calc import CalcConfig
from weir.engine.operators.window_assign import WindowAssignConfig
from weir.engine.operators.windows import SlicedWindowConfig
from weir.engine.runtime.source_reader import SourceConfig
from weir.engine.sql_eval import INPUT, describe
from weir.planner.aggregate_calls import python_aggregates
from weir.planner.aggregates import plan_window_aggregate
from weir.planner.calc import calc_description, projected_key
from weir.planner.cascaded_windows import plan_cascaded_window
from weir.planner.catalog import Catalog, TableDef
from weir.planner.changelog import require_append_only
from weir.planner.connectors import check_connector, reads_changes
from weir.planner.ctes import plan_cte_reference, plan_with
from weir.planner.errors import PlanError
from weir.planner.expressions import Scope, bind, contains_aggregate, output_name, position, quote, to_duckdb
from weir.planner.graph_builder import GraphBuilder, Stream
from weir.planner.group_aggregate import distinct_as_group_by, plan_group_aggregate
from weir.planner.grouping_sets import grouping_construct
from weir.planner.joins import is_join, plan_join
from weir.planner.joins.pruning import ALL, read_columns
from weir.planner.joins.scope import Relation
from weir.planner.lateral import LateralRelation, fold_lateral, plan_lateral
from weir.planner.limits import plan_limit, split_limit
from weir.planner.over_aggregates import is_over_aggregate, plan_over_aggregate, ranks_below
from weir.planner.ranking import plan_window_rank, uses_ranking
from weir.planner.sessions import plan_session_window
from weir.planner.types import normalise, sql_name
from weir.planner.unions import plan_union
from weir.planner.windows import (WINDOW_COLUMNS, carried_bounds, window_fields, window_problems,
                             window_spec)
from weir.sql.errors import Problem, WeirSqlError
from weir.sql.intervals import interval_micros
from weir.sql.statements import WindowTVF


def _idle_timeout(settings: dict[str, str]) -> str | None:
    """The job-wide 'table.exec.source.idle-timeout'; '0' (the default) means never idle."""
    value = settings.get("table.exec.source.idle-timeout")
    return value if value and value.strip() not in ("0", "0s", "0 ms", "0ms") else None


def _merge_bytes(settings: dict[str, str]) -> int:
    """'weir.source.merge-bytes' (default 8MB); 0 when 'weir.source.batch-size' is set and it is
    not: a batch size set on purpose (small batches for tests, low latency) is kept as it is."""
    value = settings.get("weir.source.merge-bytes")
    if value is None:
        return 0 if "weir.source.batch-size" in settings else 8 << 20
    return parse_size("weir.source.merge-bytes", value)


def bounded_delay(watermark: exp.Expression | None, column: str | None) -> list | None:
    """[column, delay µs] when the watermark is ``column`` or ``column - INTERVAL ...``
    (bounded out-of-orderness), which the engine computes without SQL."""
    if watermark is None:
        return None
    if isinstance(watermark, exp.Column) and watermark.name == column:
        return [column, 0]
    if (isinstance(watermark, exp.Sub) and isinstance(watermark.this, exp.Column)
            and watermark.this.name == column and isinstance(watermark.expression, exp.Interval)):
        try:
            return [column, interval_micros(watermark.expression)]
        except WeirSqlError:
            return None
    return None


class QueryPlanner:
    def __init__(self, catalog: Catalog, builder: GraphBuilder, settings: dict[str, str], fallback: tuple[int, int]):
        self.catalog = catalog
        self.builder = builder
        self.settings = settings
        self.fallback = fallback
        self._expanding: list[str] = []  # views being expanded, to catch cycles
        #: Common table expressions in scope (planner/ctes.py), innermost last.
        self.ctes: tuple = ()

    def fail(self, message: str, node: exp.Expression | None = None, hint: str | None = None) -> PlanError:
        line, col = position(node, self.fallback)
        return PlanError(Problem(message, line, col, hint))

    # -- relations -------------------------------------------------------------
    def plan_query(self, query: exp.Expression, pipeline: str) -> Stream:
        query = python_aggregates(query, self.catalog)  # calls of Python aggregate functions (planner.aggregate_calls)
        if isinstance(query, exp.Subquery):
            return self.plan_query(query.this, pipeline)
        if query.args.get("with_") is not None:  # WITH a AS (...) SELECT ...
            return plan_with(self, query, pipeline)
        if isinstance(query, exp.SetOperation):  # UNION ALL
            return plan_union(self, query, pipeline)
        if isinstance(query, exp.Select):
            return self._plan_select(query, pipeline)
        kind = type(query).__name__.upper()
        raise self.fail(f"{kind} queries are not supported yet", query,
                        "weir runs SELECT ... FROM one table, view or window table function")

    def plan_relation(self, relation: exp.Expression, pipeline: str) -> Stream:
        if isinstance(relation, exp.Table) and isinstance(relation.this, exp.Identifier):
            return self._plan_named(relation, pipeline)
        if isinstance(relation, exp.Subquery):
            return self.plan_query(relation.this, pipeline)
        if isinstance(relation, LateralRelation):  # t, LATERAL TABLE(f(x)) (planner/lateral.py)
            return plan_lateral(self, relation, pipeline)
        raise self.fail(f"unsupported relation in FROM: {relation.sql()}", relation)

    def _plan_named(self, table: exp.Table, pipeline: str) -> Stream:
        cte = plan_cte_reference(self, table, pipeline)
        if cte is not None:
            return cte
        found = self.catalog.lookup(table.name)
        if found is None:
            known = self.catalog.names()
            close = difflib.get_close_matches(table.name, known, n=1)
            raise self.fail(
                f"unknown table `{table.name}`", table,
                (f"did you mean `{close[0]}`? " if close else "")
                + f"declare it with CREATE TABLE {table.name} (...) WITH (...); known: {', '.join(known) or 'none'}",
            )
        if isinstance(found, TableDef):
            return self.source(found)
        if found.name.lower() in self._expanding:
            raise self.fail(f"view `{found.name}` refers to itself", table)
        self._expanding.append(found.name.lower())
        ctes, self.ctes = self.ctes, ()  # a view does not see the CTEs of the statement reading it
        try:
            return self.plan_query(found.query, pipeline)
        finally:
            self._expanding.pop()
            self.ctes = ctes

    def source(self, table: TableDef) -> Stream:
        key = table.name.lower()
        if key in self.builder.sources:
            return self.builder.sources[key]
        check_connector(table, "source")
        physical = table.physical_schema
        config = SourceConfig(
            table=table.name,
            options=dict(table.options),
            # over the physical columns: a computed watermark column is computed in it
            watermark=to_duckdb(table.physical(table.watermark), physical) if table.watermark is not None else None,
            watermark_bounded=(bounded_delay(table.watermark, table.watermark_column)
                               if table.watermark_column not in table.computed else None),
            batch_size=int(self.settings.get("weir.source.batch-size", 65536)),
            merge_bytes=_merge_bytes(self.settings),
            idle_timeout=_idle_timeout(self.settings),
        )
        description = f"Source(table=[{table.name}], connector=[{table.options.get('connector')}]"
        if table.watermark is not None:
            description += f", watermark=[{table.watermark_column} AS {table.watermark.sql()}]"
        updating = reads_changes(table.options)  # debezium-json, upsert-kafka: +I/-U/+U/-D rows
        if updating:
            physical = pa.schema([*physical, pa.field(ROW_KIND, ROW_KIND_TYPE)])
        node = self.builder.add(table.name, "source", config, physical, [], description + ")")
        times = frozenset([table.watermark_column] if table.watermark_column else [])
        stream = Stream(node.id, physical, times, table.name, append_only=not updating,
                        upsert_key=tuple(table.primary_key) if updating and table.primary_key else None)
        if table.computed:  # computed columns, in the declared order, by a calc the source feeds
            projection = [[name, to_duckdb(table.computed[name], physical) if name in table.computed else quote(name)]
                          for name in table.schema.names]
            node = self.builder.add(table.name, "calc", CalcConfig(projection=projection), table.schema,
                                    [Edge(node.id)], calc_description(projection, None, physical.names),
                                    label="computed_columns")
            stream = Stream(node.id, table.schema, times, table.name)
        self.builder.sources[key] = stream
        return stream

    # -- SELECT ------------------------------------------------------------------
    def _plan_select(self, select: exp.Select, pipeline: str) -> Stream:
        select = fold_lateral(self, select)  # FROM t, LATERAL TABLE(f(x)): one relation
        if select.args.get("limit") is not None or select.args.get("offset") is not None:  # ... LIMIT n
            plain, limit, order = split_limit(self, select)
            return plan_limit(self, self._plan_select(plain, pipeline), limit, order, pipeline, select)
        if is_over_aggregate(select):  # SUM(x) OVER (PARTITION BY k ORDER BY ts ...)
            return plan_over_aggregate(self, select, pipeline)
        if uses_ranking(select) and ranks_below(select):  # window Top-N and deduplication
            return plan_window_rank(self, select, pipeline)
        if is_join(select):  # temporal, lookup, interval, window or regular (planner/joins/)
            return plan_join(self, select, pipeline)
        for unsupported, what in (("joins", "joins"), ("with", "WITH (common table expressions)"),
                                  ("order", "ORDER BY"), ("limit", "LIMIT")):
            if select.args.get(unsupported):
                raise self.fail(f"{what} in a streaming query is not supported yet", select.args[unsupported])
        from_ = select.args.get("from_")
        if from_ is None:
            raise self.fail("a streaming query needs FROM", select)
        relation = from_.this
        window_tvf = relation if isinstance(relation, WindowTVF) else None
        stream = self.plan_relation(window_tvf.this if window_tvf else relation, pipeline)
        window = self._window(window_tvf, stream) if window_tvf else None

        if window is not None:
            scope_schema = pa.schema([*stream.schema, *window_fields()])
        else:
            scope_schema = stream.schema
        scope = Scope(scope_schema, stream.name, self.fallback)
        if select.args.get("distinct"):  # SELECT DISTINCT: GROUP BY every item
            select = distinct_as_group_by(self, select, scope)
        aggregated = select.args.get("group") is not None or any(
            contains_aggregate(e) for e in [*select.expressions, select.args.get("having") or exp.Null()]
        )
        if aggregated:
            if window is None:
                cascaded = plan_cascaded_window(self, select, stream, scope, pipeline)  # GROUP BY starttime, endtime
                if cascaded is not None:
                    return cascaded
                return plan_group_aggregate(self, select, stream, scope, pipeline)
            if window.kind == "session":
                construct = grouping_construct(select)
                if construct is not None:
                    raise self.fail(f"{construct.key.upper().replace('GROUPINGSETS', 'GROUPING SETS')} over a "
                                    "SESSION window is not supported", construct,
                                    "aggregate the sessions once per set in separate queries, or use TUMBLE, HOP "
                                    "or CUMULATE")

                return plan_session_window(self, select, window_tvf, stream, window, scope, pipeline)
            return plan_window_aggregate(self, select, stream, window, scope, pipeline)
        if window is not None and window.kind == "session":
            raise self.fail("a SESSION window needs GROUP BY window_start, window_end and its keys with an "
                            "aggregate", window_tvf,
                            "aggregate the sessions, e.g. SELECT k, window_start, window_end, COUNT(*) ... "
                            "GROUP BY k, window_start, window_end")
        if window is not None:
            stream = self._assign_window(stream, window, pipeline, self._columns_read(select, stream, window.time_column))
        return self.plan_calc(select, stream, scope, pipeline)

    def _window(self, tvf: WindowTVF, stream: Stream):
        require_append_only(self, stream, f"the window table function {tvf.kind}", tvf)
        time_col = tvf.args["time_col"]
        scope = Scope(stream.schema, stream.name, self.fallback)
        declared = scope.resolve(time_col.name)
        if declared is None:
            raise PlanError(scope.unknown_column(time_col))
        if declared not in stream.time_attributes:
            raise self.fail(
                f"{tvf.kind} on `{declared}` of `{stream.name}`, which is not a time attribute", time_col,
                self._time_attribute_hint(declared, stream),
            )
        spec = window_spec(tvf, declared)
        problems = window_problems(spec, tvf, self.fallback)
        if problems:
            raise PlanError(problems)
        return spec

    @staticmethod
    def _time_attribute_hint(column: str, stream: Stream) -> str:
        if stream.time_attributes:
            names = ", ".join(f"`{t}`" for t in sorted(stream.time_attributes))
            return f"window on a column with a watermark: {names}"
        if pa.types.is_timestamp(stream.schema.field(column).type):
            return f"declare a watermark on it: WATERMARK FOR {column} AS {column} - INTERVAL '5' SECOND"
        return (f"`{column}` is {sql_name(stream.schema.field(column).type)}; a window needs a TIMESTAMP(3) "
                "column with a WATERMARK FOR it")

    @staticmethod
    def _columns_read(select: exp.Select, stream: Stream, time_column: str) -> list[str] | None:
        """The columns of ``stream`` that ``select`` reads (``joins.pruning.read_columns``), and the
        window's ``time_column``, in the stream's order; None when that is every one."""
        names = stream.schema.names
        (read,) = read_columns(select, [Relation(stream.name, stream, names, names)])
        if read is ALL:
            return None
        columns = [name for name in names if name.lower() in read or name == time_column]
        return columns if len(columns) < len(names) else None

    def _assign_window(self, stream: Stream, window, pipeline: str, columns: list[str] | None) -> Stream:
        """Rows with their windows' bounds: the stream's ``columns`` (None: all), so that a source
        leaves out what the query does not read (Nexmark q7's bids pass on neither `channel` nor
        `url`)."""
        passed = [stream.schema.field(name) for name in columns] if columns is not None else list(stream.schema)
        schema = pa.schema([*passed, *window_fields()])
        config = WindowAssignConfig(window=SlicedWindowConfig(**window.config()), columns=columns)
        node = self.builder.add(
            pipeline, "window_assign", config, schema,
            [Edge(stream.node_id)], f"WindowAssign({window.describe()})", label="window_assign",
        )
        # window_time is a time attribute of the windowed rows (Flink's rowtime).
        return Stream(node.id, schema, (stream.time_attributes & set(schema.names)) | {"window_time"}, stream.name,
                      window_columns={name: (name, window) for name in WINDOW_COLUMNS})

    def plan_calc(self, select: exp.Select, stream: Stream, scope: Scope, pipeline: str) -> Stream:
        problems: list[Problem] = []
        projection: list[list[str]] = []
        times: set[str] = set()
        items: list[tuple[str, exp.Expression]] = []
        for index, item in enumerate(self.expand_star(select.expressions, scope)):
            name = output_name(item, index)
            bound = bind(item.unalias() if isinstance(item, exp.Alias) else item, scope, problems)
            items.append((name, bound))
            projection.append([name, to_duckdb(bound, scope.schema)])
            if isinstance(bound, exp.Column) and bound.name in stream.time_attributes:
                times.add(name)
        where = select.args.get("where")
        filter_sql = to_duckdb(bind(where.this, scope, problems), scope.schema) if where is not None else None
        if problems:
            raise PlanError(problems)
        if not stream.append_only:  # each change keeps its row kind
            projection.append([ROW_KIND, quote(ROW_KIND)])
        schema = self.describe_projection(projection, filter_sql, stream.schema, select)
        node = self.builder.add(pipeline, "calc", CalcConfig(projection=projection, filter=filter_sql), schema,
                                [Edge(stream.node_id)], calc_description(projection, filter_sql, stream.schema.names))
        return Stream(node.id, schema, frozenset(times), stream.name, stream.append_only,
                      projected_key(stream.upsert_key, projection), carried_bounds(stream.window_columns, items))

    def plan_pre_aggregate(self, stream: Stream, filter_sql: str | None, computed: list[list[str]],
                           pipeline: str, node: exp.Expression) -> Stream:
        """A Calc before a window aggregate: the WHERE filter, and the group keys that are
        expressions computed as columns, so that the exchange can hash them."""
        projection = [[name, quote(name)] for name in stream.schema.names] + computed
        schema = self.describe_projection(projection, filter_sql, stream.schema, node)
        node_ = self.builder.add(pipeline, "calc", CalcConfig(projection=projection, filter=filter_sql), schema,
                                 [Edge(stream.node_id)], calc_description(projection, filter_sql, stream.schema.names))
        return Stream(node_.id, schema, stream.time_attributes, stream.name, stream.append_only, stream.upsert_key,
                      stream.window_columns)

    def expand_star(self, items: list[exp.Expression], scope: Scope) -> list[exp.Expression]:
        out: list[exp.Expression] = []
        for item in items:
            if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
                out.extend(exp.column(name, quoted=True) for name in scope.schema.names if name != ROW_KIND)
            else:
                out.append(item)
        return out

    def describe_projection(self, projection, filter_sql, input_schema: pa.Schema, node: exp.Expression) -> pa.Schema:
        select_list = ", ".join(f"{sql} AS {quote(name)}" for name, sql in projection)
        where = f" WHERE {filter_sql}" if filter_sql else ""
        return self.describe(f"SELECT {select_list} FROM {INPUT}{where}", input_schema, node)

    def describe(self, sql: str, input_schema: pa.Schema, node: exp.Expression) -> pa.Schema:
        try:
            schema = describe(sql, input_schema)
        except duckdb.Error as error:
            message = str(error).split("\n")[0]
            raise self.fail(f"cannot evaluate this query: {message}", node,
                            "check the types of the expressions and the functions used") from None
        return pa.schema([pa.field(f.name, normalise(f.type)) for f in schema])
