"""Completion by where the cursor is: tables, columns, connector names and option keys, settings."""
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from weir.shell.completion import SqlCompleter, completions

TABLES = {"bids": ["auction", "bidder", "price", "channel", "date_time"], "per_channel": ["channel", "n"]}


def texts(statement):
    return [c.text for c in completions(statement, TABLES)]


def test_tables_after_from_join_into_describe_and_tumble():
    assert texts("SELECT * FROM b") == ["bids"]
    assert texts("SELECT * FROM ") == ["bids", "per_channel"]
    assert texts("INSERT INTO per") == ["per_channel"]
    assert texts("DESCRIBE bi") == ["bids"]
    assert texts("SELECT * FROM TUMBLE(") == ["bids", "per_channel"]


def test_columns_of_a_table_or_its_alias():
    assert texts("SELECT bids.pr") == ["price"]
    assert texts("SELECT b.") == []  # `b` names nothing yet
    assert texts("SELECT x.auction FROM bids x WHERE x.b") == ["bidder"]


def test_columns_of_the_tables_the_statement_names_come_first():
    found = texts("SELECT * FROM per_channel WHERE ch")
    assert found == ["channel", "changelog", "char_length"]
    assert texts("SELECT n FROM per_channel WHERE c")[0] == "channel"
    assert "bidder" not in texts("SELECT b FROM per_channel")


def test_keywords_and_functions_in_the_case_typed():
    assert texts("sel") == ["select"]
    assert texts("SEL") == ["SELECT"]
    assert texts("SELECT TUMBLE_S") == ["TUMBLE_START"]
    assert "quit" in texts("qu") and "QUIT" not in texts("SELECT 1 FROM bids WHERE qu")


def test_connector_names_and_their_option_keys():
    assert texts("CREATE TABLE t (a INT) WITH ('connector' = 'nex") == ["nexmark'"]
    assert "weir-shell-result'" not in texts("CREATE TABLE t (a INT) WITH ('connector' = '")
    assert texts("CREATE TABLE t (a INT) WITH ('") == ["connector'"]
    keys = texts("CREATE TABLE t (a INT) WITH ('connector' = 'nexmark', '")
    assert "first-event.rate'" in keys and "events'" in keys and "connector'" not in keys
    assert texts("CREATE TABLE t (a INT) WITH ('connector' = 'nexmark', 'events' = '10', 'fir") == ["first-event.rate'"]
    # Format options follow the chosen format.
    csv = texts("CREATE TABLE t (a INT) WITH ('connector' = 'filesystem', 'format' = 'csv', 'csv.")
    assert "csv.ignore-parse-errors'" in csv
    assert texts("CREATE TABLE t (a INT) WITH ('connector' = 'filesystem', 'format' = 'csv', 'json.") == []


def test_settings_and_result_modes():
    assert texts("SET 'sql-client.ex") == ["sql-client.execution.result-mode'"]
    assert texts("SET 'sql-client.execution.result-mode' = 'ta") == ["table'", "tableau'"]


def test_only_the_statement_under_the_cursor_counts():
    assert texts("SELECT price FROM bids; DESCRIBE ") == ["bids", "per_channel"]
    completer = SqlCompleter(lambda: TABLES)
    document = Document("SELECT 1; SELECT * FROM per")
    assert [c.text for c in completer.get_completions(document, CompleteEvent())] == ["per_channel"]
