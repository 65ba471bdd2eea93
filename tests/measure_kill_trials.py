"""Seeded SIGKILL trials: how many of N killed-and-rerun jobs end with exactly the output
of an uninterrupted run. Not a test (slow); run from the repository root:

    python tests/measure_kill_trials.py --trials 20 --seed 1

Each trial runs the job of test_rerun.py (csv, json and parquet part files, an append-only
DuckDB table and a materialized view) at parallelism 1 or 2, kills it at a random fault
point, possibly kills the rerun too, then runs the same command until it exits 0 and
compares every sink with the reference. A finished job is run once more: it must say so
and change nothing.
"""
from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "support"))

from test_recovery import CHECKPOINT_EVERY_BATCH, run  # noqa: E402
from test_rerun import make_job, outputs  # noqa: E402

POINTS = {"batch": 12, "snapshot-write": 10, "before-metadata": 8, "after-metadata": 8, "commit": 40,
          "output-committed": 1}


def trial(work: Path, rng: random.Random, reference: dict) -> tuple[bool, str]:
    directory = make_job(work, with_table=True)
    settings = ["--parallelism", str(rng.choice([1, 2])), *CHECKPOINT_EVERY_BATCH]
    kills = []
    for _ in range(rng.choice([1, 1, 2])):
        point = rng.choice(list(POINTS))
        fault = f"{point}:{rng.randint(1, POINTS[point])}"
        result = run(directory, *settings, fault=fault)
        kills.append(f"{fault}->{result.returncode}")
        if result.returncode == 0:
            break
    for _ in range(3):
        result = run(directory, *settings)
        if result.returncode == 0:
            break
    what = f"{' '.join(settings[:2])} kills {kills}"
    if result.returncode != 0:
        return False, f"{what}: rerun failed: {result.stderr[-300:]}"
    if outputs(directory) != reference:
        return False, f"{what}: output differs"
    again = run(directory, *settings)
    if again.returncode != 0 or "had already finished" not in again.stdout or outputs(directory) != reference:
        return False, f"{what}: a run of the finished job changed something"
    return True, what


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ref_dir = make_job(root / "reference", with_table=True)
        assert run(ref_dir).returncode == 0
        reference = outputs(ref_dir)
        exact = 0
        started = time.perf_counter()
        for i in range(args.trials):
            try:
                ok, what = trial(root / f"trial-{i}", rng, reference)
            except subprocess.TimeoutExpired as expired:  # a hung run is a wrong trial, not the end
                ok, what = False, f"a run hung (no exit in {expired.timeout:.0f} s): {' '.join(expired.cmd[3:])}"
            exact += ok
            print(f"trial {i}: {'exact' if ok else 'WRONG'}  {what}", flush=True)
        print(f"{exact} of {args.trials} trials exact ({time.perf_counter() - started:.0f} s)")
    return 0 if exact == args.trials else 1


if __name__ == "__main__":
    sys.exit(main())
