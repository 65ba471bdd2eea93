"""Runs the cases of the differential harness through Apache Flink (PyFlink).

Started by ``run.py`` with the Python of a PyFlink venv, never imported by
weir: ``python flink_job.py MANIFEST RESULTS``. MANIFEST is a JSON list of
``{"name", "sql"}`` (the case's SQL with its paths filled in); each case's
result is appended to RESULTS as a JSON line as soon as it is known, so a
crash of the JVM loses only the case it was running.

Every case gets a fresh streaming TableEnvironment in one JVM (a JVM start
costs seconds). DDL and views run as written. Each ``INSERT INTO sink
SELECT ...`` is first validated as written (``explain_sql``: the sink's type
checks are Flink's), then its SELECT, cast to the sink's column types as the
INSERT would, is collected with row kinds and applied to an empty table:
the sink's final rows, for append-only and updating queries alike.
"""
from __future__ import annotations

import datetime
import decimal
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import sqltext  # noqa: E402

#: The settings every case runs with (a case's own SET statements come after).
SETTINGS = {
    "parallelism.default": "1",
    "table.exec.resource.default-parallelism": "1",
    # Flink's WatermarkAssignerOperator emits a watermark after a row as soon as it is
    # more than this many milliseconds (of event time) past the last one emitted, and on
    # a processing-time timer of this period. 0: after every row that raises it, so the
    # watermark a row meets is the largest WATERMARK value of the rows before it, which
    # does not depend on how fast the machine reads the file.
    "pipeline.auto-watermark-interval": "0",
    "table.local-time-zone": "UTC",
}


def _plain(value):
    """A collected value as JSON: timestamps as text, decimals as their digits."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, datetime.datetime):
        return value.replace(tzinfo=None).isoformat(sep=" ")
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return {"decimal": str(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": bytes(value).hex()}
    if isinstance(value, dict):
        return {"map": [[_plain(k), _plain(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def _java_message(error: Exception) -> str:
    """The messages of a Java exception's cause chain (Flink's own words), deduplicated."""
    java = getattr(error, "java_exception", None)
    if java is None:
        return f"{type(error).__name__}: {error}"
    messages = []
    while java is not None:
        message = java.getMessage()
        first = str(message).strip().splitlines()[0] if message else ""
        if first and not any(first in seen for seen in messages):  # causes repeat their wrappers' words
            messages.append(first)
        java = java.getCause()
    # A parse error's first line says where; the list of expected tokens that follows is noise.
    return " | caused by: ".join(messages)


def _types(table) -> list[str]:
    return [str(t.toString()) for t in table._j_table.getResolvedSchema().getColumnDataTypes()]


def _names(table) -> list[str]:
    return [str(n) for n in table._j_table.getResolvedSchema().getColumnNames()]


def run_case(sql: str, extra_settings: dict[str, str]) -> dict:
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    for key, value in {**SETTINGS, **extra_settings}.items():
        config.set(key, value)
    declared: dict[str, sqltext.TableDecl] = {}
    sinks: dict[str, dict] = {}
    for statement in sqltext.statements(sql):
        setting = sqltext.set_statement(statement)
        if setting:
            config.set(*setting)
            continue
        table = sqltext.create_table(statement)
        if table:
            declared[table.name.lower()] = table
        target = sqltext.insert(statement)
        if target is None:
            env.execute_sql(statement).wait()
            continue
        sink = declared.get(target.target.lower())
        if sink is None:
            raise ValueError(f"INSERT INTO {target.target}: the case does not declare that table")
        env.explain_sql(statement)  # Flink's own checks of the INSERT, e.g. the sink's types
        query = env.sql_query(target.query)
        query_names, query_types = _names(query), _types(query)
        view = f"__weir_diff_{len(sinks)}"
        env.create_temporary_view(view, query)
        wanted = target.columns or [name for name, _ in sink.columns]
        by_name = dict(zip(wanted, query_names))
        select = []
        for name, type_ in sink.columns:
            source = f"`{by_name[name]}`" if name in by_name else "NULL"
            select.append(f"CAST({source} AS {type_}) AS `{name}`")
        final: Counter = Counter()
        changes = Counter()
        result = env.execute_sql(f"SELECT {', '.join(select)} FROM `{view}`")
        with result.collect() as rows:
            for row in rows:
                kind = row.get_row_kind().name
                changes[kind] += 1
                key = json.dumps([_plain(v) for v in row])
                if kind in ("INSERT", "UPDATE_AFTER"):
                    final[key] += 1
                else:
                    final[key] -= 1
                    if final[key] < 0:
                        raise ValueError(f"{kind} of a row not in the result: {key}")
                    if final[key] == 0:
                        del final[key]
        sinks[sink.name] = {
            "columns": [name for name, _ in sink.columns],
            "types": [type_ for _, type_ in sink.columns],
            "query_names": query_names,
            "query_types": query_types,
            "changes": dict(changes),
            "rows": [json.loads(key) for key, count in sorted(final.items()) for _ in range(count)],
        }
    return sinks


def main() -> int:
    manifest = json.loads(Path(sys.argv[1]).read_text())
    results = Path(sys.argv[2])
    for case in manifest:
        started = time.perf_counter()
        record = {"name": case["name"]}
        try:
            record["sinks"] = run_case(case["sql"], case.get("settings", {}))
        except Exception as error:  # a case's failure is its result; the next case runs
            record["error"] = _java_message(error)
        record["seconds"] = round(time.perf_counter() - started, 2)
        with results.open("a") as out:
            out.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
