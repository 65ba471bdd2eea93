"""Where statements end: `;` outside quotes and comments; positions kept."""
from weir.shell.splitter import is_complete, split


def test_split_keeps_positions_and_skips_empty_statements():
    text = "-- a comment\nSELECT 'a;b' FROM t; /* x; */\n  CREATE TABLE x (\n   a INT);\n;\n"
    chunks = split(text)
    assert [c.text for c in chunks] == ["-- a comment\nSELECT 'a;b' FROM t", "/* x; */\n  CREATE TABLE x (\n   a INT)"]
    assert (chunks[1].line, chunks[1].col) == (2, 22)
    # Padded back to where it stood, the chunk has the whole text's positions.
    def line_col(t, word):
        before = t[: t.index(word)]
        return before.count("\n") + 1, len(before) - before.rfind("\n")

    assert line_col(chunks[1].padded(), "CREATE") == line_col(text, "CREATE") == (3, 3)


def test_a_statement_is_complete_at_a_semicolon_in_code():
    assert is_complete("SELECT 1;")
    assert is_complete("SELECT 1;  -- done")
    assert is_complete("SELECT 1;\n")
    assert not is_complete("SELECT 1")
    assert not is_complete("SELECT ';")  # inside a string
    assert not is_complete("SELECT 1 /* ; */")
    assert not is_complete("SELECT 'it''s;")
    assert not is_complete("   ")


def test_shell_commands_need_no_semicolon():
    assert is_complete("quit") and is_complete("EXIT;") and is_complete("help")
    assert [c.shell_command for c in split("quit;")] == ["quit"]
    assert [c.shell_command for c in split("SELECT 1")] == [None]
