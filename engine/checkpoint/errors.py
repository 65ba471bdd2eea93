"""The error raised for a checkpoint or savepoint that cannot be written or read."""
from __future__ import annotations

from typing import Any

from weir.engine.errors import EngineError


class CheckpointError(EngineError):
    """A corrupt, incomplete or unreadable checkpoint or savepoint, or one that could not be
    written. The message names the checkpoint and what is wrong; the hint says what to do."""

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        operator_id: str | None = None,
        path: Any = None,
    ):
        super().__init__(message, hint=hint, operator_id=operator_id)
        #: The checkpoint or savepoint directory concerned, where known.
        self.path = path
