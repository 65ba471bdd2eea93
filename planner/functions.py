"""Flink's SQL functions, rewritten into DuckDB's.

sqlglot reads a function with the meaning of the dialect it parses with;
here each Flink function whose meaning differs in DuckDB is rewritten, so
the engine computes what a Flink user expects. ``/`` between two integers is
integer division, truncating toward zero, as in Flink and Java.
"""
from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from weir.engine.connectors.timestamps import declared_precision
from weir.engine.sql_eval import INPUT, describe

from weir.sql.intervals import check_interval_unit
from weir.sql.positions import error_at

class PatternError(ValueError):
    """A Java date-time pattern weir cannot translate; the message names the letter."""


#: Java DateTimeFormatter pattern letters weir translates: letter -> {count: strftime}.
#: 'S' (fraction of second, any count 1..9) and 'DD' are built from pieces (``_pattern_pieces``).
_JAVA_LETTERS = {
    "y": {1: "%Y", 2: "%y", 3: "%Y", 4: "%Y"},
    "M": {1: "%-m", 2: "%m", 3: "%b", 4: "%B"},
    "d": {1: "%-d", 2: "%d"},
    "D": {1: "%-j", 3: "%j"},
    "H": {1: "%-H", 2: "%H"},
    "h": {1: "%-I", 2: "%I"},
    "m": {1: "%-M", 2: "%M"},
    "s": {1: "%-S", 2: "%S"},
    "a": {1: "%p"},
    "E": {1: "%a", 2: "%a", 3: "%a", 4: "%A"},
}
SUPPORTED_LETTERS = "y yy yyyy M MM MMM MMMM d dd D DD DDD H HH h hh m mm s ss S..SSSSSSSSS a E EEE EEEE 'text'"
PATTERN_HINT = f"a pattern may use {SUPPORTED_LETTERS}; quote other text in '...' (and write '' for a quote)"


def _pattern_pieces(pattern: str) -> list[tuple[str, object]]:
    """A Java (DateTimeFormatter) pattern as pieces: ('strftime', text) or ('fraction', digits)
    or ('day_of_year', 2). Raises PatternError naming what weir cannot translate."""
    pieces: list[tuple[str, object]] = []

    def text(t: str) -> None:
        if pieces and pieces[-1][0] == "strftime":
            pieces[-1] = ("strftime", pieces[-1][1] + t)
        else:
            pieces.append(("strftime", t))

    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            close = i + 1
            literal = []
            while True:
                if close >= len(pattern):
                    raise PatternError(f"the quote at position {i + 1} of the pattern '{pattern}' is not closed")
                if pattern[close] == "'":
                    if close + 1 < len(pattern) and pattern[close + 1] == "'":
                        literal.append("'")
                        close += 2
                        continue
                    break
                literal.append(pattern[close])
                close += 1
            text("'" if close == i + 1 else "".join(literal).replace("%", "%%"))
            i = close + 1
            continue
        if not c.isascii() or not c.isalpha():
            if c in "{}#":
                raise PatternError(f"'{c}' is reserved in a date-time pattern")
            if c not in "[]":  # optional sections: every field of a timestamp is present
                text(c.replace("%", "%%"))
            i += 1
            continue
        count = 1
        while i + count < len(pattern) and pattern[i + count] == c:
            count += 1
        if c == "S":
            if count > 9:
                raise PatternError("the fraction 'S' takes at most 9 letters")
            pieces.append(("fraction", count))
        elif c == "D" and count == 2:
            pieces.append(("day_of_year", 2))
        elif c not in _JAVA_LETTERS:
            raise PatternError(f"the pattern letter '{c}' is not supported")
        elif count not in _JAVA_LETTERS[c]:
            raise PatternError(f"the pattern letter '{c}' repeated {count} times is not supported")
        else:
            text(_JAVA_LETTERS[c][count])
        i += count
    return pieces


def java_to_strftime(pattern: str, parsing: bool = False) -> str:
    """A Java date-time pattern (as Flink's DATE_FORMAT, TO_TIMESTAMP and UNIX_TIMESTAMP take) as
    one strftime/strptime format; a fraction must then be 3, 6 or 9 digits."""
    out = []
    for kind, value in _pattern_pieces(pattern):
        if kind == "strftime":
            out.append(value)
        elif kind == "fraction" and value in (3, 6, 9):
            out.append({3: "%g", 6: "%f", 9: "%n"}[value])
        else:
            what = "'" + "S" * value + "'" if kind == "fraction" else "'DD'"
            raise PatternError(f"{what} is not supported when {'parsing' if parsing else 'formatting'}"
                               " with one strftime format; use SSS, SSSSSS or SSSSSSSSS")
    return "".join(out)


def date_format(ts: exp.Expression, pattern: str) -> exp.Expression:
    """Flink's DATE_FORMAT(ts, pattern) as DuckDB's strftime, with pieces strftime lacks
    (a fraction of 1, 2, 4, 5, 7 or 8 digits; DD) cut from a strftime and joined with ``||``
    (NULL in, NULL out)."""
    parts: list[exp.Expression] = []
    for kind, value in _pattern_pieces(pattern):
        if kind == "strftime":
            parts.append(_fn("strftime", ts.copy(), exp.Literal.string(value)))
        elif kind == "fraction":
            digits = _fn("strftime", ts.copy(), exp.Literal.string("%n"))
            parts.append(_fn("substr", digits, exp.Literal.number(1), exp.Literal.number(value)))
        else:
            parts.append(_fn("lpad", _fn("strftime", ts.copy(), exp.Literal.string("%-j")),
                             exp.Literal.number(2), exp.Literal.string("0")))
    if not parts:
        return exp.Literal.string("")
    tree = parts[0]
    for part in parts[1:]:
        tree = exp.DPipe(this=tree, expression=part)
    return exp.Paren(this=tree) if len(parts) > 1 else tree


#: Characters whose upper case is two letters in Java (Unicode's SpecialCasing), which DuckDB's
#: upper leaves as one: upper('ß') is 'ẞ' in DuckDB, 'SS' in Java and Flink; Flink's UPPER('ﬁx')
#: is 'FIX'. ß and the Latin ligatures; the rarer ones (ŉ, ǰ, Greek with iota, Armenian
#: ligatures) keep DuckDB's answer (a deviation the README lists).
_UPPER_SPECIAL = {c: c.upper() for c in "ßﬀﬁﬂﬃﬄﬅﬆ"}


def _upper(node: exp.Upper) -> exp.Expression:
    value = node.this
    for char, upper in _UPPER_SPECIAL.items():
        value = _fn("replace", value, exp.Literal.string(char), exp.Literal.string(upper))
    return _fn("upper", value)


#: Flink's built-in scalar and aggregate functions by name, for hints on a misspelt one.
FLINK_FUNCTIONS = tuple("""
ABS ACOS ASCII ASIN ATAN ATAN2 AVG BIN CARDINALITY CEIL CEILING CHAR_LENGTH CHARACTER_LENGTH CHR COALESCE
COLLECT CONCAT CONCAT_WS CONVERT_TZ COS COSH COT COUNT CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP
CURRENT_WATERMARK DATE_FORMAT DAYOFMONTH DAYOFWEEK DAYOFYEAR DECODE DEGREES ENCODE EXP EXTRACT FIRST_VALUE
FLOOR FROM_BASE64 FROM_UNIXTIME GREATEST HASH_CODE HEX HOUR IF IFNULL INITCAP INSTR IS_ALPHA IS_DECIMAL
IS_DIGIT JSON_QUERY JSON_VALUE LAG LAST_VALUE LEAD LEAST LEFT LISTAGG LN LOCALTIME LOCALTIMESTAMP LOCATE LOG
LOG10 LOG2 LOWER LPAD LTRIM MAX MD5 MIN MINUTE MOD MONTH NOW NULLIF OVERLAY PARSE_URL PI POSITION POWER
PROCTIME QUARTER RADIANS RAND RAND_INTEGER REGEXP REGEXP_EXTRACT REGEXP_REPLACE REPEAT REPLACE REVERSE RIGHT
ROUND RPAD RTRIM SECOND SHA1 SHA256 SIGN SIN SINH SPLIT_INDEX SQRT STDDEV_POP STDDEV_SAMP STR_TO_MAP SUBSTR
SUBSTRING SUM TAN TANH TIMESTAMPADD TIMESTAMPDIFF TO_BASE64 TO_DATE TO_TIMESTAMP TO_TIMESTAMP_LTZ TRIM
TRUNCATE TRY_CAST UNIX_TIMESTAMP UPPER UUID VAR_POP VAR_SAMP WEEK YEAR
""".split())

#: Functions ``_anonymous`` translates (DuckDB has none of these names, or another meaning for it).
TRANSLATED = ("PROCTIME", "DATE_FORMAT", "TO_TIMESTAMP", "TO_DATE", "FROM_UNIXTIME", "UNIX_TIMESTAMP", "SPLIT_INDEX")


def _fn(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def _unit(node: exp.Expression) -> str:
    return node.name.lower()


def _cast(node: exp.Expression, to: str) -> exp.Expression:
    return exp.Cast(this=node, to=exp.DataType.build(to))


def _pattern(node: exp.Expression, parsing: bool = False, one_format: bool = True) -> str | None:
    """The strftime format for a pattern literal; a located error for one weir cannot translate."""
    try:
        return java_to_strftime(node.this, parsing) if one_format else _pattern_pieces(node.this) and None
    except PatternError as reason:
        raise error_at(node, f"cannot use the date-time pattern '{node.this}': {reason}", PATTERN_HINT) from None


def _parse_timestamp(text: exp.Expression, pattern: exp.Expression | None) -> exp.Expression:
    """Flink's TO_TIMESTAMP(text[, pattern]): NULL when the text does not parse."""
    if pattern is None:
        return exp.TryCast(this=text, to=exp.DataType.build("TIMESTAMP"))
    return _fn("try_strptime", text, exp.Literal.string(_pattern(pattern, parsing=True)))


def _anonymous(node: exp.Anonymous) -> exp.Expression:
    name, args = node.name.upper(), node.expressions
    if name == "PROCTIME" and not args:  # processing time, as a TIMESTAMP(3) without a zone
        return _fn("current_localtimestamp")
    if name == "DATE_FORMAT" and len(args) == 2 and isinstance(args[1], exp.Literal):
        _pattern(args[1], one_format=False)  # refuse what cannot be translated, pointing at the pattern
        return date_format(args[0], args[1].this)
    if name == "TO_TIMESTAMP" and len(args) in (1, 2):
        return _parse_timestamp(args[0], args[1] if len(args) == 2 else None)
    if name == "TO_DATE" and len(args) in (1, 2):
        if len(args) == 1:
            return exp.TryCast(this=args[0], to=exp.DataType.build("DATE"))
        return _cast(_parse_timestamp(args[0], args[1]), "DATE")
    if name == "FROM_UNIXTIME" and args:
        pattern = _pattern(args[1]) if len(args) > 1 else "%Y-%m-%d %H:%M:%S"
        seconds = _fn("make_timestamp", exp.Mul(this=exp.Paren(this=args[0]), expression=exp.Literal.number(1_000_000)))
        return _fn("strftime", seconds, exp.Literal.string(pattern))
    if name == "UNIX_TIMESTAMP":
        if not args:
            return _cast(_fn("epoch", exp.CurrentTimestamp()), "BIGINT")
        ts = (_fn("strptime", args[0], exp.Literal.string(_pattern(args[1], parsing=True)))
              if len(args) > 1 else _cast(args[0], "TIMESTAMP"))
        return _cast(_fn("epoch", ts), "BIGINT")
    if name == "SPLIT_INDEX" and len(args) == 3:
        return _fn("list_extract", _fn("string_split", args[0], args[1]),
                   exp.Add(this=exp.Paren(this=args[2]), expression=exp.Literal.number(1)))
    return node


#: EXTRACT fields whose DuckDB meaning differs from Flink's: Flink's MILLISECOND, MICROSECOND and
#: NANOSECOND count within the second (DuckDB's include the seconds), DOW counts 1 = Sunday
#: (DuckDB 0 = Sunday), EPOCH is whole seconds (DuckDB's has a fraction).
def _extract(node: exp.Extract) -> exp.Expression:
    field = node.name.upper()
    within_second = {"MILLISECOND": 1_000, "MICROSECOND": 1_000_000, "NANOSECOND": 1_000_000_000}
    if field in within_second:
        return exp.Paren(this=exp.Mod(this=node, expression=exp.Literal.number(within_second[field])))
    if field == "DOW":
        return exp.Paren(this=exp.Add(this=node, expression=exp.Literal.number(1)))
    if field == "EPOCH":
        return _cast(_fn("trunc", node), "BIGINT")
    return node


def _timestamp_add(node: exp.TimestampAdd) -> exp.Expression:
    unit = node.args["unit"].name.upper()
    step = exp.Interval(this=exp.Literal.string("1"), unit=exp.var(unit))
    added = exp.Add(this=node.this, expression=exp.Mul(this=exp.Paren(this=node.expression), expression=step))
    return exp.Paren(this=added)


def _timestamp_diff(node: exp.TimestampDiff) -> exp.Expression:
    """Flink's TIMESTAMPDIFF(unit, start, end): whole units from start to end, as an INT."""
    unit = node.args["unit"].name.lower()
    return _cast(_fn("date_sub", exp.Literal.string(unit), node.expression, node.this), "INT")


def _concat(node: exp.Concat) -> exp.Expression:
    """Flink's CONCAT is NULL when an argument is NULL; DuckDB's skips NULLs."""
    args = node.expressions
    any_null = exp.or_(*(exp.Is(this=a.copy(), expression=exp.Null()) for a in args))
    return exp.If(this=any_null, true=exp.Null(), false=_fn("concat", *args))


def translate_tree(tree: exp.Expression) -> exp.Expression:
    """``tree`` (changed in place) with every node translated, children before their parent, so
    that a rewrite copying its arguments copies translated ones."""
    for node in reversed(list(tree.walk(bfs=False))):
        parent, key, index = node.parent, node.arg_key, node.index
        new = translate(node)
        if new is node:
            continue
        if node is tree:
            tree = new
        else:
            parent.set(key, new, index)
    return tree


def translate(node: exp.Expression) -> exp.Expression:
    """Rewrite one node (``translate_tree`` rewrites a whole tree)."""
    if isinstance(node, exp.Anonymous):
        return _anonymous(node)
    if isinstance(node, exp.Interval):
        check_interval_unit(node)
        return node
    if isinstance(node, exp.TimestampAdd):
        return _timestamp_add(node)
    if isinstance(node, exp.TimestampDiff):
        return _timestamp_diff(node)
    if isinstance(node, exp.Extract):
        return _extract(node)
    if isinstance(node, exp.DayOfWeek):  # Flink: 1 = Sunday .. 7 = Saturday
        return exp.Paren(this=exp.Add(this=_fn("dayofweek", node.this), expression=exp.Literal.number(1)))
    if isinstance(node, exp.Concat) and not isinstance(node, exp.ConcatWs) and node.expressions:
        return _concat(node)
    if isinstance(node, exp.Upper):
        return _upper(node)
    if isinstance(node, exp.Length):  # CHAR_LENGTH is an INT in Flink
        return _cast(_fn("length", node.this), "INT")
    if isinstance(node, exp.Floor) and node.args.get("to") is not None:
        return _fn("date_trunc", exp.Literal.string(_unit(node.args["to"])), node.this)
    if isinstance(node, exp.Ceil) and node.args.get("to") is not None:
        unit = _unit(node.args["to"])
        floor = _fn("date_trunc", exp.Literal.string(unit), node.this)
        up = exp.Add(this=floor.copy(), expression=exp.Interval(this=exp.Literal.string("1"), unit=exp.var(unit.upper())))
        return exp.If(this=exp.EQ(this=floor, expression=node.this.copy()), true=node.this.copy(), false=up)
    if isinstance(node, exp.RegexpReplace) and node.args.get("modifiers") is None:
        return _fn("regexp_replace", node.this, node.expression, node.args["replacement"], exp.Literal.string("g"))
    if isinstance(node, exp.RegexpExtract):
        # Flink gives NULL when the pattern does not match; DuckDB's regexp_extract gives ''.
        group = node.args.get("position") or node.args.get("group")
        args = [node.this, node.expression] + ([group] if group is not None else [])
        matches = _fn("regexp_matches", node.this.copy(), node.expression.copy())
        return exp.If(this=matches, true=_fn("regexp_extract", *args), false=exp.Null())
    return node


_INTEGER_TYPES = {exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.INT,
                  exp.DataType.Type.BIGINT}
_STRING_TYPES = {exp.DataType.Type.VARCHAR, exp.DataType.Type.TEXT, exp.DataType.Type.CHAR,
                 exp.DataType.Type.NVARCHAR}


def _typed(node: exp.Expression) -> list[exp.Expression] | None:
    """The operands whose types decide how ``node`` is rewritten, or None when no type does."""
    if isinstance(node, exp.Div):
        return [node.this, node.expression]
    if isinstance(node, (exp.Cast, exp.TryCast)) and node.to.this in _INTEGER_TYPES | _STRING_TYPES:
        return [node.this]
    if isinstance(node, exp.Round) and _round_digits(node) is not None:
        return [node.this]
    return None


def _round_digits(node: exp.Round) -> int | None:
    digits = node.args.get("decimals")
    if digits is None:
        return 0
    if isinstance(digits, exp.Literal) and not digits.is_string and digits.this.lstrip("-").isdigit():
        return int(digits.this)
    return None


def _timestamp_text(value: exp.Expression, precision: int | None) -> exp.Expression:
    """Flink's text of a TIMESTAMP(p): always p fractional digits (``2024-01-01 00:00:02.000``
    for p = 3), where DuckDB drops trailing zeros. Without a declared precision (an expression,
    or a column declared TIMESTAMP(6)) it shows milliseconds, or microseconds where the value
    has them: TIMESTAMP(3) is what Flink's time attributes and window bounds are."""
    def formatted(pattern: str) -> exp.Expression:
        return _fn("strftime", value.copy(), exp.Literal.string(pattern))
    whole = "%Y-%m-%d %H:%M:%S"
    if precision is not None:
        if precision == 0:
            return formatted(whole)
        if precision == 3:
            return formatted(whole + ".%g")
        return _fn("substr", formatted(whole + ".%f"), exp.Literal.number(1), exp.Literal.number(20 + precision))
    sub_millisecond = exp.NEQ(this=exp.Mod(this=_fn("microsecond", value.copy()), expression=exp.Literal.number(1000)),
                              expression=exp.Literal.number(0))
    return exp.Case(ifs=[exp.If(this=sub_millisecond, true=formatted(whole + ".%f"))], default=formatted(whole + ".%g"))


def _declared_precision(operand: exp.Expression, schema: pa.Schema) -> int | None:
    if isinstance(operand, exp.Column) and operand.name in schema.names:
        return declared_precision(schema.field(operand.name))
    return None


def _rewrite_typed(node: exp.Expression, types: list[pa.DataType], precision: int | None = None) -> exp.Expression | None:
    """The Flink meaning of ``node`` given its operands' types, or None to keep it."""
    if isinstance(node, (exp.Cast, exp.TryCast)) and node.to.this in _STRING_TYPES:
        return _timestamp_text(node.this, precision) if pa.types.is_timestamp(types[0]) else None
    if isinstance(node, exp.Div):
        if pa.types.is_integer(types[0]) and pa.types.is_integer(types[1]):
            return exp.IntDiv(this=node.this, expression=node.expression)
        quotient = _decimal_quotient(*types)
        if quotient is not None:  # DuckDB divides decimals as DOUBLEs; Flink's quotient is a DECIMAL
            return _cast(exp.Paren(this=node), f"DECIMAL({quotient[0]}, {quotient[1]})")
        return None
    if isinstance(node, (exp.Cast, exp.TryCast)):
        # Flink (and Java) truncate a fraction toward zero; DuckDB rounds it.
        if pa.types.is_floating(types[0]) or pa.types.is_decimal(types[0]):
            node.set("this", _fn("trunc", node.this))
            return node
        return None
    if isinstance(node, exp.Round) and pa.types.is_floating(types[0]):
        # Flink rounds a DOUBLE half up on its decimal value (BigDecimal.valueOf): 41.05 -> 41.1,
        # where DuckDB rounds the binary value 41.0499... down.
        digits = _round_digits(node)
        if digits is None or not -18 < digits < 18:
            return None
        x = node.this
        # The shortest decimal that reads back as the DOUBLE (DuckDB's VARCHAR of a DOUBLE, as Java's).
        shortest = _cast(_cast(x.copy(), "VARCHAR"), "DECIMAL(38, 18)")
        exact = _fn("round", shortest, exp.Literal.number(digits))
        small = exp.LT(this=_fn("abs", x.copy()), expression=exp.Literal.number("1e19"))
        return exp.Case(ifs=[exp.If(this=small, true=_cast(exact, "DOUBLE"))], default=node.copy())
    return None


_INTEGER_DIGITS = {8: 3, 16: 5, 32: 10, 64: 19}


def _as_decimal(t: pa.DataType) -> tuple[int, int] | None:
    if pa.types.is_decimal(t):
        return t.precision, t.scale
    if pa.types.is_integer(t):
        return _INTEGER_DIGITS[t.bit_width], 0
    return None


def _decimal_quotient(left: pa.DataType, right: pa.DataType) -> tuple[int, int] | None:
    """Flink's type of a DECIMAL quotient (LogicalTypeMerging.findDivisionDecimalType): scale
    max(6, s1 + p2 + 1), precision p1 - s1 + s2 + scale, cut to 38 digits keeping at least 6 of
    scale. None unless one side is a DECIMAL and the other a DECIMAL or an integer."""
    a, b = _as_decimal(left), _as_decimal(right)
    if a is None or b is None or not (pa.types.is_decimal(left) or pa.types.is_decimal(right)):
        return None
    (p1, s1), (p2, s2) = a, b
    scale = max(6, s1 + p2 + 1)
    precision = p1 - s1 + s2 + scale
    if precision > 38:
        scale = max(38 - (precision - scale), min(scale, 6))
        precision = 38
    return precision, scale


def typed_rewrites(tree: exp.Expression, schema: pa.Schema) -> exp.Expression:
    """Rewrites that need the operands' types, innermost first (an inner integer division changes
    the type an outer one sees): ``/`` between integers divides as integers; CAST of a fraction to an
    integer type truncates; ROUND of a DOUBLE rounds half up on its decimal value."""
    pending = [n for n in tree.walk() if _typed(n) is not None]
    while pending:
        waiting = {id(n) for n in pending}
        ready = [n for n in pending if not any(id(inner) in waiting for inner in n.walk() if inner is not n)]
        columns = []
        for i, node in enumerate(ready):
            columns += [f"{operand.sql(dialect='duckdb')} AS o{i}_{j}" for j, operand in enumerate(_typed(node))]
        types = describe(f"SELECT {', '.join(columns)} FROM {INPUT}", schema)
        for i, node in enumerate(ready):
            operands = [types.field(f"o{i}_{j}").type for j in range(len(_typed(node)))]
            parent, key, index = node.parent, node.arg_key, node.index  # a rewrite may wrap the node
            replacement = _rewrite_typed(node, operands, _declared_precision(_typed(node)[0], schema))
            if replacement is not None and replacement is not node:
                if node is tree:
                    tree = replacement
                else:
                    parent.set(key, replacement, index)
        pending = [n for n in pending if all(n is not r for r in ready)]
    return tree


def integer_division(tree: exp.Expression, schema: pa.Schema) -> exp.Expression:
    """Every typed rewrite (kept under its first name: integer division was the first)."""
    return typed_rewrites(tree, schema)
