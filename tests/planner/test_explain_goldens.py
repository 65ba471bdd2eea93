"""EXPLAIN output kept as golden text, in the style of datafusion's sqllogictest files.

Each ``explain/<name>.sql`` is planned as ``weir explain`` would plan it, and
its text must equal ``explain/<name>.txt``. After a deliberate change to the
plan or its text, regenerate the goldens and review the diff:

    WEIR_UPDATE_GOLDENS=1 python -m pytest tests/planner/test_explain_goldens.py
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from weir.planner.planner import default_job_name, explain_text, plan_script
from weir.sql import parse

GOLDENS = Path(__file__).parent / "explain"
CASES = sorted(path.stem for path in GOLDENS.glob("*.sql"))
UPDATE = os.environ.get("WEIR_UPDATE_GOLDENS") == "1"


def explain_file(path: Path) -> str:
    script = plan_script(parse(path.read_text(), str(path)), job_name=default_job_name(path))
    return explain_text(script)


@pytest.mark.parametrize("name", CASES)
def test_explain_matches_golden(name):
    actual = explain_file(GOLDENS / f"{name}.sql")
    golden = GOLDENS / f"{name}.txt"
    if UPDATE:
        golden.write_text(actual)
    assert golden.exists(), f"no golden for {name}.sql: run with WEIR_UPDATE_GOLDENS=1 and review it"
    assert actual == golden.read_text()


def test_every_golden_has_its_sql():
    assert CASES, "no golden cases found"
    assert sorted(path.stem for path in GOLDENS.glob("*.txt")) == CASES


def _without_heading(name: str) -> str:
    return (GOLDENS / f"{name}.txt").read_text().split("\n", 1)[1]


def test_window_spellings_explain_the_same_dag():
    flink, short, legacy = (_without_heading(f"tumble_{s}") for s in ("flink_tvf", "short", "legacy"))
    assert flink == short == legacy
