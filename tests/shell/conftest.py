"""Running the `weir` command line in-process, in a temporary directory."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from weir.shell.cli import main
from weir.shell.session import Session


@dataclass
class Outcome:
    code: int
    out: str
    err: str


@pytest.fixture
def weir(capsys, tmp_path, monkeypatch):
    """Run `weir ARGS...` in-process, in a temporary working directory."""
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> Outcome:
        code = main(list(args))
        captured = capsys.readouterr()
        return Outcome(code, captured.out, captured.err)

    return run


@pytest.fixture
def session(tmp_path, monkeypatch):
    """A shell session without a terminal, its database in a temporary working directory."""
    monkeypatch.chdir(tmp_path)
    s = Session(db_path=str(tmp_path / "session.duckdb"))
    yield s
    s.jobs.cancel_all()
    s.jobs.join_all()
