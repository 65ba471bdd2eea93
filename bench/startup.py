"""Start-up: whole-process wall time, CPU and peak memory of commands that do almost nothing.

Runs, alternating, `weir --help`, a trivial job (100 Nexmark events, GROUP BY into a blackhole)
at parallelism 1 and 2, and the floor: an interpreter that only imports the libraries every job
needs. Prints the medians. Issue 17's targets: the job in <= 0.4 s at p=1 and <= 0.8 s at p=2,
`weir --help` in <= 0.2 s.

CPU is user + system of the process and of every process it started (a parallel job's
workers); memory is the peak RSS of the process itself (the coordinator). Bytecode: an
installed package has its modules compiled once, at install; a checkout run with
PYTHONDONTWRITEBYTECODE=1 compiles every weir module on every start (~0.5 s of CPU). So, unless
--as-is, the children run with bytecode cached under bench/.data/pycache (PYTHONPYCACHEPREFIX),
warmed by a first run of each command that is not counted.

    python bench/startup.py [--runs 7] [--as-is] [--baseline DIR]

--baseline DIR also runs the weir commands with DIR first on PYTHONPATH (a directory holding a
`weir` package: a symlink to another checkout), alternating with this one.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / ".data" / "startup"

JOB = """
CREATE TABLE bids (auction BIGINT, price BIGINT, date_time TIMESTAMP(3),
                   WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'events' = '100');
CREATE TABLE out (auction BIGINT, bids BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO out SELECT auction, COUNT(*) FROM bids GROUP BY auction;
"""


def weir_command() -> list[str]:
    script = Path(sys.executable).with_name("weir")
    return [str(script)] if script.exists() else [sys.executable, "-m", "weir.shell.cli"]


def cases(baseline: str | None) -> dict[str, tuple[list[str], str | None]]:
    """name -> (command, PYTHONPATH for it: None keeps the environment's)."""
    weir, job = weir_command(), ["run", "job.sql", "--fresh", "--no-progress"]
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "floor: import pyarrow, duckdb, sqlglot": [sys.executable, "-c", "import pyarrow, duckdb, sqlglot"],
        "floor of a job: + pyarrow.compute, .parquet, sqlglot's duckdb dialect": [
            sys.executable, "-c", "import pyarrow.compute, pyarrow.parquet, duckdb, sqlglot.dialects.duckdb"],
        "weir --help": [*weir, "--help"],
        "trivial job, p=1": [*weir, *job],
        "trivial job, p=2": [*weir, *job, "--parallelism", "2"],
    }
    chosen = {name: (command, None) for name, command in commands.items()}
    if baseline:
        for name, command in commands.items():
            if command[0] != sys.executable:
                chosen[f"{name} (baseline)"] = (command, baseline)
    return chosen


def become_subreaper() -> None:
    """Orphans of a run (a forkserver outliving the process that started it, and what it forked)
    become this process's children, so that their CPU is waited for and counted (Linux)."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def measure(command: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of one run: wall until the command exits; CPU of it and of
    every process it started (reaped here if they outlived it); RSS of the command itself."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=WORK, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{process.stderr.read().decode()}")
    process.stderr.close()
    orphans_cpu, _ = reap_orphans()
    return wall, usage.ru_utime + usage.ru_stime + orphans_cpu, usage.ru_maxrss / 1024


def reap_orphans() -> tuple[float, int]:
    """Wait for every process left to this subreaper (``become_subreaper``) by a run that has
    ended: their CPU seconds together (user + sys, their own waited-for children included) and
    the largest peak RSS among them (KB)."""
    cpu, peak = 0.0, 0
    while True:
        try:
            _, _, orphan = os.wait4(-1, 0)
        except ChildProcessError:
            return cpu, peak
        cpu, peak = cpu + orphan.ru_utime + orphan.ru_stime, max(peak, orphan.ru_maxrss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--as-is", action="store_true", help="run with this environment's bytecode settings")
    parser.add_argument("--baseline", metavar="DIR", help="also run weir from DIR (holding a `weir` package)")
    args = parser.parse_args()
    become_subreaper()
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "job.sql").write_text(JOB)
    env = dict(os.environ)
    if not args.as_is:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(HERE / ".data" / "pycache")
    chosen = cases(args.baseline)
    envs = {name: env if path is None else {**env, "PYTHONPATH": path} for name, (_, path) in chosen.items()}
    runs: dict[str, list] = {name: [] for name in chosen}
    for name, (command, _) in chosen.items():  # warm-up: bytecode written, files cached
        measure(command, envs[name])
    for _ in range(args.runs):  # alternating, so that a busy moment spreads over every case
        for name, (command, _) in chosen.items():
            runs[name].append(measure(command, envs[name]))
    load = os.getloadavg()[0]
    print(f"{args.runs} runs each, medians; load average {load:.1f} on {os.cpu_count()} cores"
          f"{' (loaded: compare CPU, not wall)' if load > 0.5 * (os.cpu_count() or 1) else ''}; "
          f"bytecode {'as the environment has it' if args.as_is else 'cached'}")
    print(f"{'':72} {'wall s':>7} {'CPU s':>7} {'RSS MB':>7}")
    for name, results in runs.items():
        wall, cpu, rss = (statistics.median(column) for column in zip(*results))
        print(f"{name:72} {wall:7.2f} {cpu:7.2f} {rss:7.0f}")


if __name__ == "__main__":
    main()
