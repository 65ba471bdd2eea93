"""``parse(text)``: SQL text in, weir statements out, or a ``WeirSqlError`` with line and column.

The whole text is tokenized once, so every position (of a statement, a node,
an error) is a position in the whole text. Statements are separated by ``;``.
"""
from __future__ import annotations

import difflib
import re

from sqlglot.errors import ErrorLevel, ParseError, SqlglotError, TokenError
from sqlglot.tokens import Token, TokenType

from weir.sql.dialect import TIMESTAMP_UNITS, Weir
from weir.sql.errors import Problem, WeirSqlError
from weir.sql.positions import line_col
from weir.sql.statement_builder import Span, build_statement
from weir.sql.statements import Statement

_ANSI = re.compile(r"\x1b\[[0-9;]*m")

#: sqlglot's descriptions of common syntax errors, and what to tell the user instead.
SYNTAX_HINTS = {
    "Expecting )": ("expected ')' {near}", "close the parenthesis opened before this point, or remove what does not belong"),
    "Invalid expression / Unexpected token": ("unexpected {token}", "check the syntax here; separate statements with ';'"),
    "Expected table name": ("expected a table name {near}", "name the table after FROM, JOIN, INTO or TABLE"),
    "Required keyword": ("the statement is incomplete {near}", "finish the clause that ends here, or remove it"),
    "TIMESTAMPADD unit": ("{description}", "write one of " + ", ".join(TIMESTAMP_UNITS)),
    "TIMESTAMPDIFF unit": ("{description}", "write one of " + ", ".join(TIMESTAMP_UNITS)),
    "STOP JOB needs": ("STOP JOB needs the job id as a string", "write STOP JOB '<job id>' [WITH SAVEPOINT]; SHOW JOBS lists the ids"),
}


def parse(text: str, source_name: str | None = None) -> list[Statement]:
    """Every statement in ``text``, with windows normalised (see ``sql.windows``)."""
    try:
        return [build_statement(tree, span) for tree, span in _trees(text)]
    except WeirSqlError as error:
        error.source_name, error.text = source_name, text
        raise


def _trees(text: str):
    dialect = Weir()
    try:
        tokens = dialect.tokenize(text)
    except TokenError as error:
        raise _token_error(error, text) from None
    for statement_tokens in _statements(tokens):
        _check_first_word(statement_tokens[0], text)
        parser = dialect.parser(error_level=ErrorLevel.IMMEDIATE)
        try:
            tree = parser.parse(statement_tokens, text)[0]
        except ParseError as error:
            raise _syntax_error(error, statement_tokens, text, parser.error_at_end) from None
        except SqlglotError as error:
            raise _error_at(text, statement_tokens[0].start, _clean(str(error)), "check the syntax of this statement") from None
        yield tree, Span(text, statement_tokens[0].start, statement_tokens[-1].end + 1)


#: The words a statement begins with (weir's, Flink's SQL client's, and sqlglot's that weir reads).
STATEMENT_WORDS = ("SELECT", "INSERT", "CREATE", "DROP", "SET", "RESET", "SHOW", "EXPLAIN", "DESCRIBE", "DESC",
                   "STOP", "WITH", "VALUES", "ALTER", "USE", "EXECUTE", "BEGIN", "END")


def _check_first_word(first: Token, text: str) -> None:
    """A statement that begins with a word no statement begins with (``SELEC``) is refused by that
    word, not by whatever sqlglot makes of the rest."""
    word = first.text.upper()
    if first.token_type != TokenType.VAR or word in STATEMENT_WORDS:
        return
    close = difflib.get_close_matches(word, STATEMENT_WORDS, n=1)
    hint = (f"did you mean {close[0]}? " if close else "") + "a statement begins with " + ", ".join(STATEMENT_WORDS[:10])
    raise _error_at(text, first.start, f"unknown statement keyword {first.text!r}", hint)


def _statements(tokens: list[Token]) -> list[list[Token]]:
    """The tokens of each statement: split at ';', empty statements dropped."""
    statements: list[list[Token]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            statements.append([])
        else:
            statements[-1].append(token)
    return [s for s in statements if s]


def _clean(message: str) -> str:
    return _ANSI.sub("", message)


def _error_at(text: str, offset: int, message: str, hint: str) -> WeirSqlError:
    line, col = line_col(text, offset)
    return WeirSqlError(Problem(message, line=line, col=col, hint=hint))


def _syntax_error(error: ParseError, tokens: list[Token], text: str, at_end: bool) -> WeirSqlError:
    detail = error.errors[0] if error.errors else {}
    description = _clean(detail.get("description") or str(error))
    # sqlglot gives the line and *last* column of the offending token: find the token itself.
    at = next((t for t in tokens if (t.line, t.col) == (detail.get("line"), detail.get("col"))), tokens[-1])
    token = text[at.start : at.end + 1]
    message, hint = next(
        ((m, h) for prefix, (m, h) in SYNTAX_HINTS.items() if description.startswith(prefix)),
        (description + " {near}", "check the syntax near {token}"),
    )
    near = f"after {token!r}, at the end of the statement" if at_end else f"near {token!r}"
    values = {"token": repr(token), "near": near, "description": description}
    return _error_at(text, at.start, message.format(**values), hint.format(**values))


def _token_error(error: TokenError, text: str) -> WeirSqlError:
    """The tokenizer stops at an unterminated string, quoted identifier or comment: point at its opening."""
    stop = error.end if error.end is not None else len(text)
    openings = [text.rfind(opening, 0, stop + 1) for opening in ("'", '"', "`", "/*")]
    offset = max(openings) if max(openings) >= 0 else stop
    return _error_at(
        text,
        offset,
        f"cannot read the text from {text[offset:offset + 10]!r}: an unterminated string, quoted name or comment",
        "close the quote or the /* comment that starts here",
    )
