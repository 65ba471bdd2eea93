"""Differential test against Apache Flink: the same SQL text through Flink and weir,
on the same files, and the final tables compared.

    python bench/flink_diff/run.py [--flink-python /work/flinkvenv/bin/python] [cases_dir] [-k name]

Each folder of ``cases/`` is a case:

- ``query.sql``: Flink SQL text. Sources are ``'connector' = 'filesystem'`` tables
  (``csv`` with a header line, or ``json`` lines) whose paths start with
  ``${DATA}`` (the case's folder); sinks are ``filesystem`` tables with the path
  ``${OUT}/<table name>`` and the format ``json`` (append-only) or
  ``debezium-json`` (updating); ``INSERT INTO`` fills them.
- the input files it reads (a folder of them for a source of several files, one split each);
- ``weir.sql`` (optional): the same job in the spelling weir needs, if it needs
  another (a spelling deviation: the case says so in its status);
- ``deviation.txt`` (optional): a deliberate, documented difference in
  results; the case then reports DEVIATION rather than DIFF. A line
  ``weir-error: WORDS`` makes it a refusal: weir's error must contain WORDS;
- ``expect_error.txt`` (optional): why the job is wrong: Flink refuses it, and
  the case matches when weir refuses it too, in its own words (no DuckDB
  error) at a line and column.

Flink (PyFlink, streaming mode) runs every case in one JVM, in a subprocess of
the PyFlink venv's Python (``flink_job.py``; its settings are ``SETTINGS``
there): each INSERT's SELECT is collected with its row kinds and applied to an
empty table. Flink's csv format has no header line, so Flink reads copies of
the csv inputs without theirs. weir runs each case with ``python -m weir.shell.cli
run`` from the root of the checkout this file is in, while Flink runs; its sink
files are read back (a debezium-json sink's changes applied in order). Values
are compared by the sink's declared types: timestamps as ISO text with
milliseconds, numbers within 1e-9 relative, as multisets of rows.

Prints MATCH, DIFF (with the first differing rows), DEVIATION or ERROR per case,
then ``N of M cases match``. Exit status 0 if every case matches (or deviates
as documented). Not part of the pytest suite: it needs Java and a 1 GB venv.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import sqltext  # noqa: E402

DEFAULT_FLINK_PYTHON = os.environ.get("FLINK_PYTHON", "/work/flinkvenv/bin/python")
CASE_FILES = {"query.sql", "weir.sql", "deviation.txt", "expect_error.txt", "README.md"}
SHOWN_ROWS = 5
#: A refusal in DuckDB's words rather than weir's (issue 12: checked when planned, with a hint).
RAW_DUCKDB_ERROR = re.compile(r"\b(Binder|Catalog|Parser|Conversion|Invalid Input) Error\b")


@dataclass
class Case:
    name: str
    folder: Path
    work: Path
    flink_sql: str = ""
    weir_sql: str = ""
    spelling: bool = False
    deviation: str | None = None
    deviation_error: str | None = None  # words weir's error must contain when the deviation is a refusal
    expect_error: str | None = None  # both engines must refuse the job (why)
    flink: dict | None = None  # sink -> {"columns", "types", "rows", ...}
    flink_error: str | None = None
    weir: dict | None = None
    weir_error: str | None = None
    weir_seconds: float = 0.0
    flink_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


# -- preparing ---------------------------------------------------------------------------


def _fill(text: str, data: Path, out: Path) -> str:
    return text.replace("${DATA}", str(data)).replace("${OUT}", str(out))


def _copy_input(path: Path, to: Path) -> None:
    lines = path.read_text().splitlines(keepends=True)
    if path.suffix == ".csv":
        lines = lines[1:]  # Flink's csv format reads no header line
    to.write_text("".join(lines))


def prepare(folder: Path, work_root: Path) -> Case:
    case = Case(folder.name, folder, work_root / folder.name)
    case.work.mkdir(parents=True)
    flink_data = case.work / "flink_data"
    flink_data.mkdir()
    for path in folder.iterdir():
        if path.is_dir():  # a source of several files (splits): its files, copied as below
            (flink_data / path.name).mkdir()
            for inner in sorted(path.iterdir()):
                _copy_input(inner, flink_data / path.name / inner.name)
        elif path.is_file() and path.name not in CASE_FILES:
            _copy_input(path, flink_data / path.name)
    query = (folder / "query.sql").read_text()
    weir_text = folder / "weir.sql"
    case.spelling = weir_text.is_file()
    case.flink_sql = _fill(query, flink_data, case.work / "flink_out")
    case.weir_sql = _fill(weir_text.read_text() if case.spelling else query, folder, case.work / "weir_out")
    deviation = folder / "deviation.txt"
    if deviation.is_file():
        lines = deviation.read_text().strip().splitlines()
        wanted = [l for l in lines if l.lower().startswith("weir-error:")]
        case.deviation = " ".join(l for l in lines if l not in wanted).strip()
        case.deviation_error = wanted[0].split(":", 1)[1].strip() if wanted else None
    refused = folder / "expect_error.txt"
    case.expect_error = refused.read_text().strip() if refused.is_file() else None
    return case


# -- weir --------------------------------------------------------------------------------


def run_weir(case: Case, python: str, timeout: float) -> None:
    job = case.work / "weir_job.sql"
    job.write_text(case.weir_sql)
    command = [python, "-m", "weir.shell.cli", "run", str(job), "--db", str(case.work / "weir.duckdb"),
               "--state-dir", str(case.work / "weir_state"), "--no-progress"]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        case.weir_error = f"timed out after {timeout:.0f} s"
        return
    finally:
        case.weir_seconds = time.perf_counter() - started
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).strip().splitlines() if line.strip()]
        text = " / ".join(lines[-6:]) or f"exit status {done.returncode}"
        case.weir_error = text.replace(f"{case.work}/", "")  # the job file is weir_job.sql
        return
    try:
        case.weir = read_weir_sinks(case.weir_sql)
    except Exception as error:  # an unreadable output is this case's error, not the run's
        case.weir_error = f"reading weir's output: {type(error).__name__}: {error}"


def read_weir_sinks(sql: str) -> dict:
    declared, sinks = {}, {}
    for statement in sqltext.statements(sql):
        table = sqltext.create_table(statement)
        if table:
            declared[table.name.lower()] = table
        target = sqltext.insert(statement)
        if target is None:
            continue
        sink = declared[target.target.lower()]
        directory = Path(sink.options["path"])
        fmt = sink.options.get("format", "")
        columns = [name for name, _ in sink.columns]
        final: Counter = Counter()
        parts = sorted(p for p in directory.glob("part-*")) if directory.is_dir() else []
        for part in parts:
            if fmt == "csv":
                with part.open(newline="") as f:
                    for record in csv.DictReader(f):
                        final[json.dumps([record.get(c) or None for c in columns])] += 1
                continue
            for line in part.read_text().splitlines():
                if not line.strip():
                    continue
                record = json.loads(line)
                if fmt == "debezium-json":
                    if record["op"] in ("c", "r", "u"):
                        final[json.dumps([record["after"].get(c) for c in columns])] += 1
                    else:
                        key = json.dumps([record["before"].get(c) for c in columns])
                        final[key] -= 1
                        if final[key] == 0:
                            del final[key]
                else:
                    final[json.dumps([record.get(c) for c in columns])] += 1
        negative = [k for k, v in final.items() if v < 0]
        if negative:
            raise ValueError(f"{sink.name}: a retraction of a row never inserted: {negative[0]}")
        sinks[sink.name] = {"columns": columns, "types": [t for _, t in sink.columns],
                            "rows": [json.loads(k) for k, n in sorted(final.items()) for _ in range(n)]}
    return sinks


# -- Flink -------------------------------------------------------------------------------


def start_flink(cases: list[Case], python: str, work_root: Path,
                settings: dict[str, str]) -> tuple[subprocess.Popen, Path]:
    manifest = work_root / "flink_manifest.json"
    manifest.write_text(json.dumps([{"name": c.name, "sql": c.flink_sql, "settings": settings} for c in cases]))
    results = work_root / "flink_results.jsonl"
    log = (work_root / "flink.log").open("w")
    process = subprocess.Popen([python, str(HERE / "flink_job.py"), str(manifest), str(results)],
                               cwd=work_root, stdout=log, stderr=subprocess.STDOUT)
    return process, results


def collect_flink(cases: list[Case], results: Path) -> None:
    by_name = {}
    if results.is_file():
        for line in results.read_text().splitlines():
            record = json.loads(line)
            by_name[record["name"]] = record
    for case in cases:
        record = by_name.get(case.name)
        case.flink_seconds = record.get("seconds", 0.0) if record else 0.0
        if record is None:
            case.flink_error = "Flink did not report this case (see flink.log in the work directory)"
        elif "error" in record:
            case.flink_error = record["error"]
        else:
            case.flink = record["sinks"]


# -- comparing ---------------------------------------------------------------------------


def _timestamp_text(value) -> str:
    text = str(value).replace("T", " ")
    moment = datetime.datetime.fromisoformat(text)
    digits = f"{moment.microsecond:06d}"
    fraction = digits[:3] if digits[3:] == "000" else digits
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + fraction


def _number(value) -> float:
    if isinstance(value, dict) and "decimal" in value:
        value = value["decimal"]
    return float(value)


def normalise(value, type_: str | None):
    """A value as comparable text for its declared type."""
    if value is None:
        return None
    t = (type_ or "").upper()
    try:
        if t.startswith("TIMESTAMP"):
            return _timestamp_text(value)
        if t.startswith("DATE"):
            return str(value)[:10]
        if t.startswith(("DECIMAL", "NUMERIC", "DOUBLE", "FLOAT", "REAL")):
            number = _number(value)
            return "nan" if math.isnan(number) else f"{number + 0.0:.9g}"  # + 0.0: -0.0 is 0
        if t.startswith(("BIGINT", "INT", "SMALLINT", "TINYINT", "INTEGER")):
            return str(int(_number(value)))
        if t.startswith("BOOLEAN"):
            return str(value).lower()
    except (TypeError, ValueError):
        return repr(value)
    if isinstance(value, dict) and "decimal" in value:
        return value["decimal"]
    return value if isinstance(value, str) else json.dumps(value)


def _rows(sink: dict) -> Counter:
    types = sink["types"]
    return Counter(tuple(normalise(v, t) for v, t in zip(row, types)) for row in sink["rows"])


def _show(row: tuple) -> str:
    return "(" + ", ".join("NULL" if v is None else str(v) for v in row) + ")"


def compare(case: Case) -> tuple[str, list[str]]:
    """The case's status and the lines that explain it."""
    if case.expect_error:
        if case.flink_error and case.weir_error:
            if not re.search(r"weir_job\.sql:\d+:\d+: error: ", case.weir_error):
                return "DIFF", [f"weir refuses without an error at a line and column: {case.weir_error}"]
            raw = RAW_DUCKDB_ERROR.search(case.weir_error)
            if raw:
                return "DIFF", [f"weir refuses with DuckDB's raw {raw.group(0)!r}: {case.weir_error}"]
            return "MATCH", [f"both refuse ({case.expect_error}); weir: {case.weir_error}"]
        if not case.flink_error:
            return "ERROR", ["Flink accepts the job the case expects refused: fix the case"]
        return "DIFF", [f"Flink refuses ({case.flink_error}); weir ran it"]
    if case.deviation and case.weir_error and not case.flink_error:
        if case.deviation_error is None or case.deviation_error.lower() in case.weir_error.lower():
            return "DEVIATION", [f"documented: {case.deviation}", f"weir: {case.weir_error}"]
        return "ERROR", [f"weir's error does not say {case.deviation_error!r}: {case.weir_error}"]
    if case.flink_error or case.weir_error:
        lines = []
        if case.flink_error:
            lines.append(f"flink: {case.flink_error}")
        if case.weir_error:
            lines.append(f"weir: {case.weir_error}")
        return "ERROR", lines
    lines = []
    for name, flink_sink in case.flink.items():
        weir_sink = case.weir.get(name)
        if weir_sink is None:
            lines.append(f"{name}: weir wrote no such sink")
            continue
        flink_rows, weir_rows = _rows(flink_sink), _rows(weir_sink)
        if flink_rows == weir_rows:
            continue
        only_flink = sorted((flink_rows - weir_rows).elements(), key=repr)
        only_weir = sorted((weir_rows - flink_rows).elements(), key=repr)
        lines.append(f"{name} {flink_sink['columns']}: Flink {sum(flink_rows.values())} rows, "
                     f"weir {sum(weir_rows.values())}; {len(only_flink)} only in Flink, {len(only_weir)} only in weir")
        lines += [f"  flink only: {_show(r)}" for r in only_flink[:SHOWN_ROWS]]
        lines += [f"  weir only:  {_show(r)}" for r in only_weir[:SHOWN_ROWS]]
    if not lines:
        return "MATCH", []
    return ("DEVIATION", [f"documented: {case.deviation}", *lines]) if case.deviation else ("DIFF", lines)


# -- the command -------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases_dir", nargs="?", default=str(HERE / "cases"))
    parser.add_argument("--flink-python", default=DEFAULT_FLINK_PYTHON,
                        help=f"the Python of a venv with apache-flink (default {DEFAULT_FLINK_PYTHON}, or $FLINK_PYTHON)")
    parser.add_argument("--weir-python", default=sys.executable, help="the Python that runs weir (default this one)")
    parser.add_argument("-k", action="append", default=[], metavar="NAME",
                        help="only cases whose name contains NAME (repeatable)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per weir case (default 300)")
    parser.add_argument("--types", action="store_true", help="also print Flink's types of each INSERT's SELECT")
    parser.add_argument("--flink-set", action="append", default=[], metavar="KEY=VALUE",
                        help="a Flink setting for every case, over flink_job.SETTINGS (repeatable)")
    parser.add_argument("--show-flink", action="store_true", help="also print Flink's final rows of every sink")
    parser.add_argument("--keep", action="store_true", help="keep the work directory and print where it is")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    folders = sorted(p for p in Path(args.cases_dir).iterdir() if (p / "query.sql").is_file())
    if args.k:
        folders = [p for p in folders if any(k in p.name for k in args.k)]
    if not folders:
        print(f"no cases in {args.cases_dir}" + (f" matching {args.k}" if args.k else ""), file=sys.stderr)
        return 2
    if not Path(args.flink_python).exists():
        print(f"no Python at {args.flink_python}: make a PyFlink venv with\n"
              "  python3.11 -m venv /work/flinkvenv && /work/flinkvenv/bin/pip install apache-flink==2.3.0\n"
              "or pass --flink-python", file=sys.stderr)
        return 2
    work_root = Path(tempfile.mkdtemp(prefix="flink-diff-"))
    try:
        cases = [prepare(folder, work_root) for folder in folders]
        settings = dict(item.split("=", 1) for item in args.flink_set)
        flink, results = start_flink(cases, args.flink_python, work_root, settings)
        for case in cases:
            run_weir(case, args.weir_python, args.timeout)
        flink.wait()
        collect_flink(cases, results)
        counts = Counter()
        for case in cases:
            status, lines = compare(case)
            counts[status] += 1
            tag = " [weir.sql spelling]" if case.spelling else ""
            print(f"{status:9} {case.name}{tag}  (Flink {case.flink_seconds:.1f} s, weir {case.weir_seconds:.1f} s)")
            for line in lines:
                print(f"          {line}")
            if args.types and case.flink:
                for sink, data in case.flink.items():
                    pairs = ", ".join(f"{n} {t}" for n, t in zip(data["query_names"], data["query_types"]))
                    print(f"          Flink's SELECT into {sink}: {pairs}")
            if args.show_flink and case.flink:
                for sink, data in case.flink.items():
                    print(f"          Flink's {sink} {data['columns']}:")
                    for row in sorted(_rows(data).elements(), key=repr):
                        print(f"            {_show(row)}")
        matched = counts["MATCH"]
        spelled = sum(1 for c in cases if c.spelling)
        print(f"\n{matched} of {len(cases)} cases match"
              + (f" ({spelled} with a weir.sql spelling)" if spelled else "")
              + "".join(f", {counts[s]} {s}" for s in ("DIFF", "DEVIATION", "ERROR") if counts[s])
              + f"; {time.perf_counter() - started:.0f} s")
        if args.keep:
            print(f"work directory: {work_root}")
        return 0 if counts["DIFF"] == counts["ERROR"] == 0 else 1
    finally:
        if not args.keep:
            shutil.rmtree(work_root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
