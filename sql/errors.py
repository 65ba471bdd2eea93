"""SQL errors with a position and a hint; shared by sql/ and planner/."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Problem:
    message: str
    line: int | None = None  # 1-based, in the whole text given to parse()
    col: int | None = None  # 1-based
    hint: str | None = None

    def __str__(self) -> str:
        where = f"{self.line}:{self.col}: " if self.line is not None else ""
        hint = f"\n  hint: {self.hint}" if self.hint else ""
        return f"{where}{self.message}{hint}"


class WeirSqlError(Exception):
    """One or more problems in the SQL text. ``problems[0]`` is the first."""

    def __init__(self, problems: list[Problem] | Problem, *, source_name: str | None = None, text: str | None = None):
        self.problems = [problems] if isinstance(problems, Problem) else list(problems)
        self.source_name = source_name
        self.text = text
        super().__init__("\n".join(str(p) for p in self.problems))

    @property
    def message(self) -> str:
        return self.problems[0].message

    @property
    def column(self) -> int | None:
        return self.problems[0].col

    @property
    def line(self) -> int | None:
        return self.problems[0].line

    @property
    def col(self) -> int | None:
        return self.problems[0].col

    @property
    def hint(self) -> str | None:
        return self.problems[0].hint
