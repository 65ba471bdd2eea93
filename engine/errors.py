"""Errors raised while a job runs. They carry structure; the shell renders them."""
from __future__ import annotations


class EngineError(Exception):
    """A failure the user can act on: what went wrong, where, and the fix."""

    def __init__(self, message: str, *, hint: str | None = None, operator_id: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.operator_id = operator_id

    def __str__(self) -> str:
        text = self.message
        if self.operator_id:
            text = f"[{self.operator_id}] {text}"
        if self.hint:
            text = f"{text}\n  hint: {self.hint}"
        return text


class SourceError(EngineError):
    """Bad input data: a malformed row, a missing file or column."""


class ConnectorOptionError(EngineError):
    """A connector was configured with a bad or missing option; ``option`` is the key of the
    WITH clause it is about, when it is about one (the planner points at it)."""

    option: str | None = None


class JobCancelled(EngineError):
    """The job was stopped from outside (Ctrl-C, STOP JOB) before it finished."""
