"""Jobs applying Python table functions with LATERAL TABLE, each compared with a DuckDB batch query
over the same input file: over hypothesis-drawn lines and batch sizes (inner join, LEFT JOIN ...
ON TRUE, a TUMBLE window after the lateral join), over an updating input (a GROUP BY result,
whose retractions flow through the function), from the Python API, and at parallelism 2 with a
worker killed (SIGKILL) and restarted, with exact output."""
from __future__ import annotations

from pathlib import Path

import duckdb
from hypothesis import given, settings, strategies as st

import weir
from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

from jobs import outcome_within

FUNCTIONS = """
CREATE FUNCTION split AS 'udtf_functions.split_words' LANGUAGE PYTHON;
CREATE TEMPORARY FUNCTION split_arrow AS 'udtf_functions.split_words_arrow';
CREATE FUNCTION count_to AS 'udtf_functions.count_to';
"""
TABLE = """
CREATE TABLE lines (ts TIMESTAMP(3), k VARCHAR, s VARCHAR, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'csv');
"""
#: view name -> (weir's query, DuckDB's batch query over `src`)
WORDS = "(SELECT ts, k, unnest(string_split(coalesce(s, ''), ' ')) AS w FROM src)"
VIEWS = {
    "words": ("SELECT k, word, n FROM lines, LATERAL TABLE(split(s)) AS T(word, n)",
              f"SELECT k, w, length(w) FROM {WORDS} WHERE w <> ''"),
    "padded": ("SELECT ts, k, word, n FROM lines LEFT JOIN LATERAL TABLE(split_arrow(s)) AS T(word, n) ON TRUE",
               "WITH l AS (SELECT row_number() OVER () AS id, ts, k, s FROM src), "
               "w AS (SELECT id, unnest(string_split(coalesce(s, ''), ' ')) AS w FROM l) "
               "SELECT l.ts, l.k, w.w, length(w.w) FROM l LEFT JOIN (SELECT * FROM w WHERE w <> '') AS w USING (id)"),
    "per_window": ("SELECT window_start, k, COUNT(*) AS words, SUM(n) AS letters "
                   "FROM TABLE(TUMBLE(TABLE lines, DESCRIPTOR(ts), INTERVAL '10' SECOND)), "
                   "LATERAL TABLE(split(s)) AS T(word, n) GROUP BY window_start, window_end, k",
                   f"SELECT time_bucket(INTERVAL '10 seconds', ts), k, count(*), sum(length(w)) FROM {WORDS} "
                   "WHERE w <> '' GROUP BY ALL"),
    "updating": ("SELECT n, COUNT(*) AS keys FROM (SELECT k, COUNT(*) AS c FROM lines GROUP BY k) AS g "
                 "CROSS JOIN LATERAL TABLE(count_to(g.c)) AS T(n) GROUP BY n",
                 "SELECT r.n, count(*) FROM (SELECT k, count(*) AS c FROM src GROUP BY k) AS g, "
                 "range(1, g.c + 1) AS r(n) GROUP BY r.n"),
}


def write_lines(path: Path, lines: list[tuple[str, str]]) -> Path:
    """A csv of (ts, k, s): one row per 1.5 s, in order (no row is late)."""
    rows = "".join(f"2024-01-01 00:{i * 3 // 120:02d}:{i * 3 // 2 % 60:02d}.{i % 2 * 5}00,{k},{s}\n"
                   for i, (k, s) in enumerate(lines))
    path.write_text("ts,k,s\n" + rows)
    return path


def oracle(data: Path, query: str) -> list[tuple]:
    con = duckdb.connect()
    con.execute(f"CREATE VIEW src AS SELECT * FROM read_csv('{data}', header = true, "
                "columns = {'ts': 'TIMESTAMP', 'k': 'VARCHAR', 's': 'VARCHAR'})")
    return sorted(con.sql(query).fetchall(), key=repr)


def view_rows(tmp: Path, data: Path, names: list[str], **job_settings: str) -> dict[str, list[tuple]]:
    sql = FUNCTIONS + TABLE.format(data=data) + "".join(
        f"CREATE MATERIALIZED VIEW {name} AS {VIEWS[name][0]};\n" for name in names)
    db = tmp / "views.duckdb"
    run_job(plan_script(parse(sql), db_path=str(db), settings=job_settings).graph,
            JobOptions(state_dir=tmp / "state"))
    with duckdb.connect(str(db), read_only=True) as con:
        return {name: sorted(con.sql(f"SELECT * FROM {name}").fetchall(), key=repr) for name in names}


words = st.lists(st.sampled_from(["ab", "b", "cde", ""]), max_size=4).map(" ".join)


@settings(max_examples=6, deadline=None)
@given(lines=st.lists(st.tuples(st.sampled_from(["p", "q"]), words), min_size=1, max_size=30),
       batch=st.integers(1, 7))
def test_lateral_joins_give_the_batch_querys_rows_for_any_input_and_batch_size(tmp_path_factory, lines, batch):
    tmp = tmp_path_factory.mktemp("lateral")
    data = write_lines(tmp / "lines.csv", lines)
    names = ["words", "padded", "per_window", "updating"]
    got = view_rows(tmp, data, names, **{"weir.source.batch-size": str(batch)})
    for name in names:
        assert got[name] == oracle(data, VIEWS[name][1]), name


def test_an_updating_input_sends_its_retractions_through_the_function(tmp_path):
    """One row per batch: each key's count grows 1, 2, 3, ..., and each growth retracts the rows
    count_to gave for the old count; without their row kinds the counts would only grow."""
    lines = [("p", "x")] * 4 + [("q", "y")] * 2
    data = write_lines(tmp_path / "lines.csv", lines)
    got = view_rows(tmp_path, data, ["updating"], **{"weir.source.batch-size": "1"})
    assert got["updating"] == [(1, 2), (2, 2), (3, 1), (4, 1)] == oracle(data, VIEWS["updating"][1])


def test_a_table_function_registered_from_python_runs_in_a_job(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    @weir.udtf(result_types=["STRING"])
    def letters(s):
        yield from (s or "")

    data = write_lines(tmp_path / "lines.csv", [("p", "ab"), ("q", ""), ("p", "c")])
    con = weir.connect(db=str(tmp_path / "results.duckdb"), state_dir=tmp_path / "jobs")
    try:
        con.create_function("letters", letters)
        con.execute(TABLE.format(data=data))
        job = con.execute("CREATE MATERIALIZED VIEW chars AS SELECT k, c FROM lines, LATERAL TABLE(letters(s)) AS T(c)")
        assert job.wait(60) == "FINISHED"
        assert con.sql("SELECT k, c FROM chars ORDER BY c").fetchall() == [("p", "a"), ("p", "b"), ("p", "c")]
    finally:
        con.close()


RECOVERY_JOB = FUNCTIONS + TABLE + """
CREATE TABLE per_window (window_start TIMESTAMP(3), k VARCHAR, words BIGINT, letters BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
CREATE VIEW padded AS SELECT ts, k, word, n FROM lines LEFT JOIN LATERAL TABLE(split_arrow(s)) AS T(word, n) ON TRUE;
INSERT INTO per_window SELECT window_start, k, COUNT(word), SUM(n)
FROM TABLE(TUMBLE(TABLE padded, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k;
"""
RECOVERY_ORACLE = ("SELECT time_bucket(INTERVAL '10 seconds', ts), k, count(nullif(w, '')), sum(length(nullif(w, ''))) "
                   f"FROM {WORDS} GROUP BY ALL")
RECOVERY_SETTINGS = {"parallelism.default": "2", "weir.source.batch-size": "2",
                     "weir.checkpointing.interval-batches": "1", "restart-strategy.type": "fixed-delay",
                     "restart-strategy.fixed-delay.attempts": "1", "restart-strategy.fixed-delay.delay": "0s"}


def test_at_parallelism_2_a_killed_worker_restarts_and_the_output_is_exact(tmp_path, monkeypatch):
    """Each worker imports the table function by module name; worker 1 is killed (SIGKILL) after
    its third source batch, the job restarts from its last checkpoint, and the windows written are
    exactly the batch query's, each once."""
    (tmp_path / "lines").mkdir()
    for part in range(2):  # two splits: each worker reads one
        write_lines(tmp_path / "lines" / f"part-{part}.csv",
                    [("pq"[i % 2], " ".join(["ab", "c", ""][: i % 4])) for i in range(part, 24, 2)])
    monkeypatch.setenv("WEIR_FAULT", "batch:3@1")
    monkeypatch.setenv("WEIR_FAULT_ONCE", str(tmp_path / "fired"))
    sql = RECOVERY_JOB.format(data=tmp_path / "lines", out=tmp_path / "out")
    graph = plan_script(parse(sql), db_path=str(tmp_path / "v.duckdb"), settings=RECOVERY_SETTINGS).graph
    warnings: list[str] = []
    outcome = outcome_within(180, lambda: run_job(graph, JobOptions(state_dir=tmp_path / "state",
                                                                    warn=warnings.append)), "the job hung")
    assert not isinstance(outcome, BaseException), outcome
    assert (tmp_path / "fired").exists(), "the fault never fired"
    assert len(warnings) == 1 and "worker 1 of job" in warnings[0] and "restarting" in warnings[0]
    written = duckdb.sql(f"SELECT * FROM read_csv('{tmp_path / 'out'}/*.csv')").fetchall()
    expected = oracle(tmp_path / "lines" / "*.csv", RECOVERY_ORACLE)
    assert len(expected) >= 4 and sorted(written, key=repr) == expected
