"""A completed checkpoint or savepoint, verified, from which operators restore.

``Checkpoint.load`` trusts nothing but ``_metadata``: it parses and checksums it,
then checks that every file it records exists with the recorded size and SHA-256.
``operator_state`` reads the files again, checking each as it is read, and cuts
every table down to the key groups asked for, which is how state taken at one
parallelism restores at another; for a restore (``stream=True``) a table is a
``RestoredTable`` that the operator streams into its state, owned key groups only.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from weir.engine.checkpoint.errors import CheckpointError
from weir.engine.checkpoint.files import FileProblem, is_dir, is_file, read_bytes, verify_file
from weir.engine.checkpoint.location import Location, parse_location
from weir.engine.checkpoint.metadata import (
    METADATA_FILE,
    CheckpointInfo,
    MetadataProblem,
    decode_metadata,
    info_of,
)
from weir.engine.checkpoint.state_files import read_subtask_state

_HINT = "restore from another checkpoint or savepoint; this one cannot be used as it is"


def read_metadata(path: "Location | str", label: str) -> dict[str, Any]:
    """The checked ``_metadata`` record of the directory ``path``; ``label`` names it in errors."""
    path = parse_location(path)
    try:
        data = read_bytes(path / METADATA_FILE)
    except FileNotFoundError:
        raise CheckpointError(
            f"{label} at {path} has no {METADATA_FILE}: it was never completed",
            hint="a checkpoint exists only once its _metadata is written; " + _HINT,
            path=path,
        ) from None
    except OSError as e:
        raise CheckpointError(f"{label} at {path} cannot be read: {e}", hint=_HINT, path=path) from e
    try:
        return decode_metadata(data)
    except MetadataProblem as e:
        raise CheckpointError(f"{label} at {path} is corrupt: {e}", hint=_HINT, path=path) from None


class Checkpoint:
    """A completed checkpoint or savepoint whose files were verified when it was loaded."""

    def __init__(self, path: "Location | str", record: dict[str, Any]):
        self.path = parse_location(path)
        self.id: int = record["checkpoint_id"]
        self.kind: str = record["kind"]
        self.size_bytes: int = record["size_bytes"]
        self.created_at: datetime = datetime.fromisoformat(record["created_at"])
        #: The coordinator's metadata as given to ``CheckpointWriter.commit`` (through JSON).
        self.metadata: dict[str, Any] = record["metadata"]
        self._record = record
        self._operators: dict[str, dict[str, Any]] = record["operators"]

    @classmethod
    def load(cls, path: "Location | str", label: str | None = None) -> "Checkpoint":
        """Parse and verify the checkpoint or savepoint directory ``path``."""
        path = parse_location(path)
        if path.name == METADATA_FILE and is_file(path):
            path = path.parent
        label = label or "checkpoint or savepoint"
        if not is_dir(path):
            raise CheckpointError(
                f"there is no {label} at {path}",
                hint="give the directory of a savepoint or checkpoint (the one holding _metadata)",
                path=path,
            )
        record = read_metadata(path, label)
        checkpoint = cls(path, record)
        checkpoint.verify()
        return checkpoint

    @property
    def name(self) -> str:
        return f"{self.kind} {self.id} at {self.path}"

    @property
    def info(self) -> CheckpointInfo:
        return info_of(self._record, self.path)

    @property
    def operator_ids(self) -> list[str]:
        """The operators with state in this checkpoint."""
        return list(self._operators)

    def parallelism(self, operator_id: str) -> int:
        """How many subtasks of ``operator_id`` wrote state (0 if none)."""
        return len(self._operators.get(operator_id, {}))

    def verify(self) -> None:
        """Check every recorded file's size and checksum; raise ``CheckpointError`` naming the first bad one."""
        for operator_id, subtasks in self._operators.items():
            for handle in subtasks.values():
                for entry in handle["files"]:
                    try:
                        verify_file(self.path, entry)
                    except FileProblem as e:
                        raise self._corrupt(e, operator_id) from None
                    except OSError as e:
                        raise self._corrupt(f"a file cannot be read: {e}", operator_id) from e

    def operator_state(self, operator_id: str, key_groups: range | None = None, *,
                       stream: bool = False) -> list[Any]:
        """The snapshots of every subtask of ``operator_id``, by subtask index, each table
        cut to the rows whose key group is in ``key_groups`` (None: all rows); with
        ``stream`` the tables are read batch by batch as the operator restores them
        (``state_files.read_subtask_state``).

        An operator without state here gives ``[]``; compare ``operator_ids`` with the job
        to tell a new operator from a missing one."""
        subtasks = self._operators.get(operator_id, {})
        states = []
        for subtask in sorted(subtasks, key=int):
            try:
                states.append(read_subtask_state(self.path, subtasks[subtask], key_groups, stream=stream))
            except FileProblem as e:
                raise self._corrupt(e, operator_id) from None
            except (OSError, ValueError, KeyError) as e:
                raise self._corrupt(f"the state of subtask {subtask} cannot be read: {e}", operator_id) from e
        return states

    def _corrupt(self, reason: Any, operator_id: str) -> CheckpointError:
        return CheckpointError(
            f"{self.name} is corrupt: {reason}", hint=_HINT, operator_id=operator_id, path=self.path
        )

    def __repr__(self) -> str:
        return f"Checkpoint(id={self.id}, kind={self.kind!r}, path={str(self.path)!r})"
