"""`weir run`, `weir savepoint` and `weir stop`: a job from start to finish, and
talking to a running one from another terminal."""
from __future__ import annotations

import sys
from pathlib import Path

from weir.engine.checkpoint.coordinator import CheckpointEvent
from weir.engine.errors import EngineError
from weir.engine.runtime import control
from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.explain import explain
from weir.planner.planner import Script, default_job_name
from weir.shell import render


def state_dir(args, job_name: str, script: Script | None = None) -> Path:
    """--state-dir, else the 'state.checkpoints.dir' setting, else .weir/<job name>."""
    if getattr(args, "state_dir", None):
        return Path(args.state_dir)
    if script is not None and script.graph.settings.get("state.checkpoints.dir"):
        return Path(script.graph.settings["state.checkpoints.dir"])
    return Path(".weir") / job_name


def run(args, script: Script) -> int:
    err_tty = sys.stderr.isatty()
    show_progress = err_tty and not args.no_progress
    last: list[CheckpointEvent] = []

    def on_progress(p) -> None:
        line = render.progress_line(p) + (f"  {render.checkpoint_text(last[-1])}" if last else "")
        print("\r\x1b[2K" + line, end="", file=sys.stderr, flush=True)

    def warn(message: str) -> None:
        print(("\r\x1b[2K" if show_progress else "") + f"warning: {message}", file=sys.stderr, flush=True)

    options = JobOptions(
        state_dir=state_dir(args, script.graph.name, script),
        from_savepoint=Path(args.from_savepoint) if args.from_savepoint else None,
        on_progress=on_progress if show_progress else None,
        progress_interval=args.progress_interval,
        on_checkpoint=last.append,
        warn=warn,
        fresh=getattr(args, "fresh", False),
    )
    try:
        result = run_job(script.graph, options)
    except EngineError as error:
        if show_progress:
            print(file=sys.stderr)
        print(render.engine_error(error, err_tty), file=sys.stderr)
        return 1
    if show_progress:
        print("\r\x1b[2K", end="", file=sys.stderr, flush=True)
    print(render.summary(result, db_path=args.db, views=script.materialized_views,
                         late_rows_tables=script.late_rows_tables))
    if getattr(args, "analyze", False) and not result.already_finished:
        print()
        print(explain(script.graph, f"job {script.graph.name}, as run", {m.id: m for m in result.operators}), end="")
    return 0


def _control_dir(args) -> Path:
    name = default_job_name(args.job) if args.job.endswith(".sql") else args.job
    return state_dir(args, name) / "control"


def savepoint(args) -> int:
    return _ask(args, "savepoint")


def stop(args) -> int:
    if not args.savepoint:
        print("weir: stop needs --savepoint (stop a job without one with Ctrl-C where it runs)", file=sys.stderr)
        return 2
    return _ask(args, "stop")


def _ask(args, kind: str) -> int:
    try:
        answer = control.send(_control_dir(args), kind, Path(args.path) if args.path else None,
                              timeout=args.timeout)
    except EngineError as error:
        print(render.engine_error(error, sys.stderr.isatty()), file=sys.stderr)
        return 1
    if not answer.get("ok"):
        print(f"error: {answer.get('error')}", file=sys.stderr)
        return 1
    verb = "stopped with savepoint" if kind == "stop" else "savepoint"
    print(f"{verb} {answer['checkpoint_id']} at {answer['path']}")
    job = args.job if args.job.endswith(".sql") else "<job.sql>"
    print(f"resume with: weir run {job} --from-savepoint {answer['path']}")
    return 0
