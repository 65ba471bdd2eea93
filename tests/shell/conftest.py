"""Running the `weir` command line in-process, in a temporary directory."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from shell.cli import main


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
