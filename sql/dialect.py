"""weir's SQL dialect: RisingWave's, plus Flink's streaming spellings.

RisingWave's parser already reads ``WATERMARK FOR col AS expr`` and
``WITH ('k' = 'v')``. On top of it this dialect reads:

- window table functions, Flink's ``TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts),
  size))`` with positional or named (``SIZE => ...``) arguments, RisingWave's
  ``TUMBLE(t, ts, size)`` and the legacy ``GROUP BY TUMBLE(ts, size)``, all as
  the raw node ``WindowCall`` (``sql.windows`` turns it into ``WindowTVF``);
- ``EXPLAIN <statement>``, ``SHOW TABLES|VIEWS|JOBS|[USER] FUNCTIONS|CATALOGS|DATABASES|CREATE TABLE t|CREATE VIEW v``, ``STOP JOB 'id'
  [WITH SAVEPOINT]``, ``RESET ['key']``;
- Flink's ``CREATE [TEMPORARY [SYSTEM]] FUNCTION [IF NOT EXISTS] f AS 'module.f'
  [LANGUAGE PYTHON]`` and ``DROP [TEMPORARY [SYSTEM]] FUNCTION [IF EXISTS] f``;
- Flink's ``LATERAL TABLE(f(args)) [AS] T(a, b)`` (a table function applied per row, in
  ``FROM t, ...``, ``CROSS JOIN ...`` or ``LEFT JOIN ... ON TRUE``) as a ``LateralTable`` node,
  whose call is always an ``exp.Anonymous`` of the name as written (a table function may be
  called ``split``, which sqlglot would read as its own two-argument SPLIT);
- backquoted identifiers, as in Flink.
"""
from __future__ import annotations

import bisect

from sqlglot import exp
from sqlglot.dialects.risingwave import RisingWave
from sqlglot.generators.risingwave import RisingWaveGenerator
from sqlglot.parsers.risingwave import RisingWaveParser
from sqlglot.tokens import TokenType
from sqlglot.trie import new_trie

from weir.sql.statements import WindowTVF

#: Each window's interval parameters in positional order (after the table and time column).
WINDOW_PARAMETERS = {
    "TUMBLE": ("size", "offset"),
    "HOP": ("slide", "size", "offset"),
    "CUMULATE": ("step", "size", "offset"),
    "SESSION": ("gap",),
}
WINDOW_KINDS = tuple(WINDOW_PARAMETERS)

#: The units of Flink's TIMESTAMPADD and TIMESTAMPDIFF, and their SQL_TSI_ spellings.
TIMESTAMP_UNITS = ("MICROSECOND", "MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR")
TIMESTAMP_UNIT_ALIASES = {f"SQL_TSI_{unit}": unit for unit in TIMESTAMP_UNITS} | {"FRAC_SECOND": "MICROSECOND"}


class WindowCall(exp.Expression):
    """A window function call as written, before ``sql.windows`` normalises it.

    this:         'TUMBLE' | 'HOP' | 'CUMULATE' | 'SESSION'
    expressions:  the arguments: TableArgument, Descriptor, exp.Kwarg (named) or any expression
    wrapped:      True when written inside Flink's TABLE(...)
    """

    arg_types = {"this": True, "expressions": False, "wrapped": False}


class TableArgument(exp.Expression):
    """``TABLE bids`` or ``TABLE (SELECT ...)`` as a table function argument, with SESSION's PARTITION BY."""

    arg_types = {"this": True, "partition_by": False}


class Descriptor(exp.Expression):
    """``DESCRIPTOR(col)``: names the time attribute column."""

    arg_types = {"expressions": True}


class LateralTable(exp.Expression):
    """``LATERAL TABLE(f(x, ...)) AS T(a, b)``: this: the call (``exp.Anonymous``); alias: an
    ``exp.TableAlias`` or None."""

    arg_types = {"this": True, "alias": False}


class ExplainStatement(exp.Expression):
    arg_types = {"this": True}


class StopJobStatement(exp.Expression):
    arg_types = {"this": True, "with_savepoint": False}


class ResetStatement(exp.Expression):
    arg_types = {"this": False}


class CreateFunctionStatement(exp.Expression):
    """this: the name (exp.Table); expression: the 'module.function' string; language: its word."""

    arg_types = {"this": True, "expression": True, "language": False, "temporary": False, "system": False,
                 "exists": False}


class DropFunctionStatement(exp.Expression):
    arg_types = {"this": True, "temporary": False, "system": False, "exists": False}


#: The words CREATE and DROP FUNCTION begin with: Flink's catalog, temporary and temporary system functions.
_FUNCTION_PREFIXES = {(): {}, ("TEMPORARY",): {"temporary": True},
                      ("TEMPORARY", "SYSTEM"): {"temporary": True, "system": True}}


def _show(what: str):
    return lambda self: self.expression(exp.Show(this=what))


def _show_create(what: str):
    """SHOW CREATE TABLE|VIEW name (Flink's): the statement that declared it."""
    return lambda self: self.expression(exp.Show(this=what, target=self._parse_table_parts()))


class MetadataColumn(exp.Expression):
    """``col TYPE METADATA [FROM 'key'] [VIRTUAL]``: a column a connector fills from each
    record's metadata (Kafka's 'offset', 'partition', 'timestamp', 'topic')."""
    arg_types = {"this": False, "virtual": False}


class WeirParser(RisingWaveParser):
    FUNC_TOKENS = {*RisingWaveParser.FUNC_TOKENS, TokenType.SESSION}

    # Flink's TO_TIMESTAMP and TO_DATE take Java patterns, not Postgres's: keep them as written
    # (planner.functions translates the pattern).
    FUNCTIONS = {k: v for k, v in RisingWaveParser.FUNCTIONS.items() if k not in ("TO_TIMESTAMP", "TO_DATE")}

    FUNCTION_PARSERS = {
        **RisingWaveParser.FUNCTION_PARSERS,
        **{kind: lambda self, kind=kind: self._parse_window_call(kind) for kind in WINDOW_KINDS},
        "TABLE": lambda self: self._parse_table_function(),
        "DESCRIPTOR": lambda self: self._parse_descriptor(),
        "TIMESTAMPADD": lambda self: self._parse_timestamp_function(exp.TimestampAdd),
        "TIMESTAMPDIFF": lambda self: self._parse_timestamp_function(exp.TimestampDiff),
    }

    CONSTRAINT_PARSERS = {
        **RisingWaveParser.CONSTRAINT_PARSERS,
        "WATERMARK": lambda self: self._parse_watermark(),
        "METADATA": lambda self: self.expression(MetadataColumn(
            this=self._parse_string() if self._match(TokenType.FROM) else None,
            virtual=exp.true() if self._match_text_seq("VIRTUAL") else None)),
    }

    STATEMENT_PARSERS = {
        **RisingWaveParser.STATEMENT_PARSERS,
        TokenType.SHOW: lambda self: self._parse_show(),
    }

    SHOW_PARSERS = {
        **RisingWaveParser.SHOW_PARSERS,
        "TABLES": _show("TABLES"),
        "VIEWS": _show("VIEWS"),
        "JOBS": _show("JOBS"),
        # Flink SQL client's catalog statements (weir has one catalog and one database).
        "FUNCTIONS": _show("FUNCTIONS"),
        "USER FUNCTIONS": _show("USER FUNCTIONS"),
        "CATALOGS": _show("CATALOGS"),
        "DATABASES": _show("DATABASES"),
        "CURRENT CATALOG": _show("CURRENT CATALOG"),
        "CURRENT DATABASE": _show("CURRENT DATABASE"),
        "CREATE TABLE": _show_create("CREATE TABLE"),
        "CREATE VIEW": _show_create("CREATE VIEW"),
    }
    SHOW_TRIE = new_trie(key.split(" ") for key in SHOW_PARSERS)

    #: weir's own statements, by their first words.
    STATEMENT_TEXT_PARSERS = {
        ("EXPLAIN",): lambda self: self._parse_explain(),
        ("STOP", "JOB"): lambda self: self._parse_stop_job(),
        ("RESET",): lambda self: self.expression(ResetStatement(this=self._parse_string())),
        **{("CREATE", *words, "FUNCTION"): lambda self, kind=kind: self._parse_create_function(kind)
           for words, kind in _FUNCTION_PREFIXES.items()},
        **{("DROP", *words, "FUNCTION"): lambda self, kind=kind: self._parse_drop_function(kind)
           for words, kind in _FUNCTION_PREFIXES.items()},
    }

    #: Whether the last syntax error came at the end of the statement (nothing left to read).
    error_at_end = False

    def raise_error(self, message: str, token=None) -> None:
        self.error_at_end = token is None and not self._curr
        super().raise_error(message, token)

    def _parse_statement(self) -> exp.Expr | None:
        for words, parser in self.STATEMENT_TEXT_PARSERS.items():
            if self._match_text_seq(*words):
                return parser(self)
        return super()._parse_statement()

    def _warn_unsupported(self) -> None:
        # sql.parser reports every statement that falls back to a Command as an error.
        return None

    def expression(self, instance, token=None, comments=None):
        node = super().expression(instance, token=token, comments=comments)
        if token is None and isinstance(node, exp.Binary) and not isinstance(node, (exp.Dot, exp.PropertyEQ)):
            operator = self._operator_token(node)
            if operator is not None:
                # Where the operator stands, for errors about it (sql.positions.operator_position).
                node.meta["operator"] = (operator.line, operator.col - (operator.end - operator.start))
        return node

    def _operator_token(self, node: exp.Binary):
        """The token after the left operand of ``node``, closing parentheses skipped."""
        ends = [n.meta["end"] for n in node.this.walk() if n._meta and "end" in n.meta] if node.this else []
        if not ends:
            return None
        i = bisect.bisect_right(self._tokens, max(ends), key=lambda t: t.start)
        while i < len(self._tokens) and self._tokens[i].token_type == TokenType.R_PAREN:
            i += 1
        return self._tokens[i] if i < len(self._tokens) else None

    def _match_pair(self, token_type_a, token_type_b, advance: bool = True) -> bool:
        # sqlglot reads ``>>`` and ``<<`` as two tokens; ``price > > 10`` must not become a shift.
        if token_type_a == token_type_b and token_type_a in (TokenType.GT, TokenType.LT):
            if not (self._curr and self._next and self._curr.end + 1 == self._next.start):
                return False
        return super()._match_pair(token_type_a, token_type_b, advance)

    def _parse_timestamp_function(self, kind: type[exp.Func]) -> exp.Func:
        """Flink's ``TIMESTAMPADD(unit, count, ts)`` and ``TIMESTAMPDIFF(unit, start, end)``: the
        unit is a keyword, not a column. Read as ``kind(this=ts|end, expression=count|start, unit=UNIT)``."""
        name = self._function_name_token()
        unit_token = self._curr
        unit = unit_token.text.upper() if unit_token else ""
        unit = TIMESTAMP_UNIT_ALIASES.get(unit, unit)
        if unit not in TIMESTAMP_UNITS:
            self.raise_error(f"{name.text.upper()} unit {unit_token.text if unit_token else ''!r} is unknown", unit_token)
        self._advance()
        if not self._match(TokenType.COMMA):
            self.raise_error(f"{name.text.upper()} unit: expecting ',' after {unit}")
        first = self._parse_assignment()
        if not self._match(TokenType.COMMA):
            self.raise_error(f"{name.text.upper()} unit: expecting ',' after its second argument")
        second = self._parse_assignment()
        self._expect_r_paren()
        return self.expression(kind(this=second, expression=first, unit=exp.var(unit)), token=name)

    def _parse_interval(self, require_interval: bool = True, parse_function_unit: bool = True) -> exp.Expr | None:
        # Remember where INTERVAL stands, so that an error about the interval points at it.
        keyword = self._curr
        interval = super()._parse_interval(require_interval, parse_function_unit)
        if isinstance(interval, exp.Interval) and keyword and keyword.token_type == TokenType.INTERVAL:
            interval.update_positions(keyword)
        return interval

    def _parse_watermark(self) -> exp.Expr:
        keyword = self._prev
        return RisingWaveParser.CONSTRAINT_PARSERS["WATERMARK"](self).update_positions(keyword)

    def _parse_explain(self) -> ExplainStatement:
        self._match_text_seq("PLAN", "FOR")
        explained = self._curr
        # The node's position is where the explained statement begins.
        return self.expression(ExplainStatement(this=self._parse_statement()), token=explained)

    def _parse_stop_job(self) -> StopJobStatement:
        job_id = self._parse_string()
        if not job_id:
            self.raise_error("STOP JOB needs the job id as a string, e.g. STOP JOB '3f2a'")
        with_savepoint = self._match_text_seq("WITH", "SAVEPOINT")
        return self.expression(StopJobStatement(this=job_id, with_savepoint=with_savepoint))

    def _parse_create_function(self, kind: dict) -> CreateFunctionStatement:
        exists = self._match_text_seq("IF", "NOT", "EXISTS")
        name = self._parse_table_parts()
        if not self._match(TokenType.ALIAS):
            self.raise_error("CREATE FUNCTION needs AS 'module.function', e.g. CREATE FUNCTION f AS 'my_udfs.f' "
                             "LANGUAGE PYTHON")
        target = self._parse_string()
        if target is None:
            self.raise_error("CREATE FUNCTION needs AS 'module.function' as a string")
        language = None
        if self._match_text_seq("LANGUAGE"):
            language = self._curr.text.upper() if self._curr else None
            self._advance()
        return self.expression(CreateFunctionStatement(this=name, expression=target, language=language,
                                                       exists=exists, **kind))

    def _parse_drop_function(self, kind: dict) -> DropFunctionStatement:
        exists = self._match_text_seq("IF", "EXISTS")
        return self.expression(DropFunctionStatement(this=self._parse_table_parts(), exists=exists, **kind))

    def _parse_lateral(self) -> exp.Expr | None:
        if not (self._curr and self._curr.token_type == TokenType.LATERAL and self._next
                and self._next.token_type == TokenType.TABLE):
            return super()._parse_lateral()
        lateral = self._curr
        self._advance(2)
        if not self._match(TokenType.L_PAREN):
            self.raise_error("LATERAL TABLE needs a call in parentheses, e.g. LATERAL TABLE(split(s)) AS T(word)")
        name = self._curr
        if name is None or name.token_type not in self.ID_VAR_TOKENS and name.token_type not in self.FUNC_TOKENS:
            self.raise_error("LATERAL TABLE(...) calls a table function by name, e.g. LATERAL TABLE(split(s))", name)
        self._advance()
        if not self._match(TokenType.L_PAREN):
            self.raise_error(f"LATERAL TABLE({name.text} needs its arguments in parentheses: {name.text}(x)")
        arguments = [] if self._match(TokenType.R_PAREN, advance=False) else self._parse_csv(self._parse_assignment)
        if not self._match(TokenType.R_PAREN):
            self.raise_error(f"Expecting ) after the arguments of {name.text}")
        if not self._match(TokenType.R_PAREN):
            self.raise_error("Expecting ) to close LATERAL TABLE(...)")
        call = self.expression(exp.Anonymous(this=name.text, expressions=arguments), token=name)
        return self.expression(LateralTable(this=call, alias=self._parse_table_alias()), token=lateral)

    # -- window table functions ------------------------------------------------------------

    def _function_name_token(self):
        # FUNCTION_PARSERS run after the name and its opening parenthesis.
        return self._tokens[self._index - 2]

    def _expect_r_paren(self) -> None:
        # sqlglot consumes a FUNCTION_PARSERS call's ")" only if it is there: insist on it.
        if not self._match(TokenType.R_PAREN, advance=False):
            self.raise_error("Expecting )")

    def _parse_window_call(self, kind: str) -> WindowCall:
        name = self._function_name_token()
        arguments = self._parse_csv(self._parse_window_argument)
        self._expect_r_paren()
        return self.expression(WindowCall(this=kind, expressions=arguments), token=name)

    def _parse_window_argument(self) -> exp.Expr | None:
        if self._next and self._next.token_type == TokenType.FARROW and self._curr.token_type in self.ID_VAR_TOKENS:
            name = self._curr
            self._advance(2)
            value = self._parse_window_argument_value()
            return self.expression(exp.Kwarg(this=exp.var(name.text.upper()), expression=value), token=name)
        return self._parse_window_argument_value()

    def _parse_window_argument_value(self) -> exp.Expr | None:
        if not self._match(TokenType.TABLE):
            return self._parse_assignment()
        start = self._prev
        if self._match(TokenType.L_PAREN, advance=False):
            relation = self._parse_select(table=True)
        else:
            relation = self._parse_table_parts()
        partition_by = self._parse_partition_keys() if self._match(TokenType.PARTITION_BY) else None
        return self.expression(TableArgument(this=relation, partition_by=partition_by), token=start)

    def _parse_partition_keys(self) -> list[exp.Expr]:
        if self._match(TokenType.L_PAREN):
            keys = self._parse_csv(self._parse_column)
            self._match_r_paren()
            return keys
        # Unparenthesised keys end where the next window argument begins:
        # DESCRIPTOR(...), an interval, or a named argument.
        keys = [self._parse_column()]
        while self._next_is_partition_key():
            self._advance()
            keys.append(self._parse_column())
        return keys

    def _next_is_partition_key(self) -> bool:
        """After ``PARTITION BY k1``: is ``, k2`` another key (followed by ``,``, ``)`` or ``.``)?"""
        if not self._match(TokenType.COMMA, advance=False) or self._index + 2 >= len(self._tokens):
            return False
        after = self._tokens[self._index + 2].token_type
        return self._next.token_type in self.ID_VAR_TOKENS and after in (TokenType.COMMA, TokenType.R_PAREN, TokenType.DOT)

    def _parse_descriptor(self) -> Descriptor:
        name = self._function_name_token()
        columns = self._parse_csv(self._parse_column)
        self._expect_r_paren()
        return self.expression(Descriptor(expressions=columns), token=name)

    def _parse_table_function(self) -> exp.Expr:
        """Flink's ``TABLE(<window call>)``; anything else stays an anonymous TABLE(...) call."""
        arguments = self._parse_function_args()
        self._expect_r_paren()
        if len(arguments) == 1 and isinstance(arguments[0], WindowCall):
            arguments[0].set("wrapped", True)
            return arguments[0]
        return self.expression(exp.Anonymous(this="TABLE", expressions=arguments))


def _windowcall_sql(self: RisingWaveGenerator, e: WindowCall) -> str:
    call = self.func(e.name, *e.expressions)
    return f"TABLE({call})" if e.args.get("wrapped") else call


def _lateral_table_sql(self: RisingWaveGenerator, e: LateralTable) -> str:
    alias = self.sql(e, "alias")
    return f"LATERAL TABLE({self.sql(e, 'this')})" + (f" AS {alias}" if alias else "")


def _table_argument_sql(self: RisingWaveGenerator, e: TableArgument | WindowTVF) -> str:
    keys = self.expressions(e, key="partition_by", flat=True)
    return f"TABLE {self.sql(e, 'this')}" + (f" PARTITION BY {keys}" if keys else "")


def _windowtvf_sql(self: RisingWaveGenerator, e: WindowTVF) -> str:
    """Render the normalised window as Flink writes it, so that it parses back to itself."""
    arguments = [
        _table_argument_sql(self, e),
        f"DESCRIPTOR({self.sql(e, 'time_col')})",
        *(self.sql(e, name) for name in WINDOW_PARAMETERS[e.kind] if e.args.get(name)),
    ]
    alias = self.sql(e, "alias")
    return f"TABLE({self.func(e.kind, *arguments)})" + (f" AS {alias}" if alias else "")


class WeirGenerator(RisingWaveGenerator):
    SINGLE_STRING_INTERVAL = False  # INTERVAL '1' MINUTE, as Flink writes it

    TRANSFORMS = {
        **RisingWaveGenerator.TRANSFORMS,
        WindowCall: _windowcall_sql,
        TableArgument: _table_argument_sql,
        LateralTable: _lateral_table_sql,
        Descriptor: lambda self, e: self.func("DESCRIPTOR", *e.expressions),
        WindowTVF: _windowtvf_sql,
        exp.Show: lambda self, e: f"SHOW {e.name}" + (f" {self.sql(e, 'target')}" if e.args.get("target") else ""),
        ExplainStatement: lambda self, e: f"EXPLAIN {self.sql(e, 'this')}",
        StopJobStatement: lambda self, e: f"STOP JOB {self.sql(e, 'this')}"
        + (" WITH SAVEPOINT" if e.args.get("with_savepoint") else ""),
        ResetStatement: lambda self, e: f"RESET {self.sql(e, 'this')}".rstrip(),
        CreateFunctionStatement: lambda self, e: f"CREATE FUNCTION {self.sql(e, 'this')} AS {self.sql(e, 'expression')}"
        + (f" LANGUAGE {e.args['language']}" if e.args.get("language") else ""),
        DropFunctionStatement: lambda self, e: f"DROP FUNCTION {self.sql(e, 'this')}",
        exp.TimestampAdd: lambda self, e: self.func("TIMESTAMPADD", e.args["unit"], e.expression, e.this),
        exp.TimestampDiff: lambda self, e: self.func("TIMESTAMPDIFF", e.args["unit"], e.expression, e.this),
    }


class Weir(RisingWave):
    # NULLs are the smallest value, as in Flink: ORDER BY v puts them first, ORDER BY v DESC last
    # (RisingWave inherits Postgres's opposite rule). sqlglot then writes the explicit
    # NULLS FIRST/LAST for DuckDB, which sorts NULLs last either way.
    NULL_ORDERING = "nulls_are_small"

    class Tokenizer(RisingWave.Tokenizer):
        IDENTIFIERS = [*RisingWave.Tokenizer.IDENTIFIERS, "`"]
        # EXPLAIN and RESET are weir statements, and SHOW has its own parsers: none swallows
        # the rest of the statement as a command's text.
        # FLOAT is 4 bytes in Flink (Postgres, and so RisingWave, read it as DOUBLE).
        KEYWORDS = {**{k: v for k, v in RisingWave.Tokenizer.KEYWORDS.items() if k not in ("EXPLAIN", "RESET")},
                    "FLOAT": TokenType.FLOAT}
        COMMANDS = RisingWave.Tokenizer.COMMANDS - {TokenType.SHOW}

    Parser = WeirParser

    Generator = WeirGenerator
