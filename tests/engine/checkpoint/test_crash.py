"""A process killed (SIGKILL) at the worst moments of writing a checkpoint.

The child commits checkpoints 1-3 (retaining 3), then dies while writing
checkpoint 4 at a chosen point. Whatever the point, what remains is either the
checkpoint before, intact, or checkpoint 4 complete — never a checkpoint that
looks complete and is not."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from weir.engine.checkpoint.storage import CheckpointStorage

CHILD = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from weir.engine.checkpoint import state_files, storage as storage_module, writer as writer_module
    from weir.engine.checkpoint.files import fsync_directory
    from weir.engine.checkpoint.storage import CheckpointStorage
    from state_builders import window_snapshot

    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    def commit(storage, checkpoint_id):
        writer = storage.writer(checkpoint_id)
        for subtask in range(2):
            writer.write_state("op", subtask, window_snapshot([subtask, 64 + subtask], watermark=checkpoint_id))
        writer.commit({"offset": checkpoint_id})

    directory, point = Path(sys.argv[1]), sys.argv[2]
    storage = CheckpointStorage(directory, retained=3)
    for checkpoint_id in (1, 2, 3):
        commit(storage, checkpoint_id)
    if point == "while writing state files":
        calls = []
        original = state_files.write_file
        def write_file(*args):
            calls.append(args)
            return die() if len(calls) == 4 else original(*args)
        state_files.write_file = write_file
    elif point == "after the temporary metadata, before its rename":
        def write_atomically(path, data):
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            fsync_directory(path.parent)
            die()
        writer_module.write_atomically = write_atomically
    elif point == "while removing an old checkpoint":
        original = storage_module.remove_directory
        storage_module.remove_directory = lambda path: die() if path.name == "chk-1" else original(path)
    commit(storage, 4)
""")

POINTS = {
    # point: (latest id, completed ids, incomplete directories left)
    "while writing state files": (3, [3, 2, 1], ["chk-4"]),
    "after the temporary metadata, before its rename": (3, [3, 2, 1], ["chk-4"]),
    "while removing an old checkpoint": (4, [4, 3, 2], ["chk-1"]),
    "no crash": (4, [4, 3, 2], []),
}


@pytest.mark.parametrize("point", list(POINTS))
def test_a_kill_leaves_the_previous_checkpoint_or_the_new_one_never_half_of_one(tmp_path, point):
    directory = tmp_path / "checkpoints"
    here = Path(__file__).parent
    result = subprocess.run([sys.executable, "-c", CHILD, str(directory), point],
                            capture_output=True, text=True, cwd=here)
    assert result.returncode == (0 if point == "no crash" else -signal.SIGKILL), result.stderr
    latest_id, completed_ids, incomplete = POINTS[point]

    storage = CheckpointStorage(directory)
    warnings: list[str] = []
    checkpoint = storage.latest(warn=warnings.append)
    assert warnings == []
    assert checkpoint.id == latest_id and checkpoint.metadata == {"offset": latest_id}
    assert [s["watermark"] for s in checkpoint.operator_state("op")] == [latest_id, latest_id]
    assert [c.id for c in storage.completed()] == completed_ids

    storage.discard_incomplete()
    left = sorted(p.name for p in directory.iterdir())
    assert left == sorted(f"chk-{i}" for i in completed_ids)
    assert all(name not in left for name in incomplete)
