"""The prompt's lexer: keywords, functions, strings, numbers, comments, quoted names."""
from prompt_toolkit.document import Document

from weir.shell.highlight import SqlLexer, tokens


def kinds(text):
    return [(kind, value) for kind, value in tokens(text) if kind != "text"]


def test_words_strings_numbers_and_comments():
    assert kinds("select COUNT(*) FROM bids WHERE price > 10.5 AND channel = 'it''s' -- note") == [
        ("keyword", "select"), ("function", "COUNT"), ("keyword", "FROM"), ("keyword", "WHERE"),
        ("number", "10.5"), ("keyword", "AND"), ("string", "'it''s'"), ("comment", "-- note"),
    ]
    assert kinds('SELECT "from", `select` FROM t') == [
        ("keyword", "SELECT"), ("name", '"from"'), ("name", "`select`"), ("keyword", "FROM")]


def test_a_word_inside_a_name_is_not_a_number_or_keyword():
    assert kinds("SELECT t1.col2 FROM t1") == [("keyword", "SELECT"), ("keyword", "FROM")]


def test_a_comment_and_a_string_span_lines():
    lexer = SqlLexer().lex_document(Document("SELECT /* one\ntwo */ 'a\nb' FROM t"))
    assert lexer(0) == [("class:keyword", "SELECT"), ("", " "), ("class:comment", "/* one")]
    assert lexer(1) == [("class:comment", "two */"), ("", " "), ("class:string", "'a")]
    assert lexer(2) == [("class:string", "b'"), ("", " "), ("class:keyword", "FROM"), ("", " t")]
    assert lexer(3) == []


def test_an_unterminated_string_runs_to_the_end():
    assert kinds("SELECT 'abc") == [("keyword", "SELECT"), ("string", "'abc")]
