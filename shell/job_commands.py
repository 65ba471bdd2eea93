"""`weir run`, `weir savepoint` and `weir stop`: a job from start to finish, and
talking to a running one from another terminal."""
from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

from weir.engine.errors import EngineError
from weir.engine.runtime import control
from weir.engine.runtime.local import Progress
from weir.planner.explain import explain
from weir.planner.planner import Script, default_job_name
from weir.shell import render
from weir.shell.api import Connection

#: Seconds `weir run` waits, after Ctrl-C or SIGTERM, for the job's last checkpoint.
STOP_TIMEOUT = 300.0


def state_dir(args, job_name: str, script: Script | None = None) -> Path:
    """--state-dir, else .weir/<job name> (the checkpoints go there too, unless
    'state.checkpoints.dir' puts them elsewhere: ``engine.runtime.job.checkpoint_locations``)."""
    if getattr(args, "state_dir", None):
        return Path(args.state_dir)
    return Path(".weir") / job_name


class _StopOnSignal:
    """SIGINT (Ctrl-C) and SIGTERM while `weir run` runs: the first asks the job, through its
    control channel, to take a checkpoint, commit its output and stop (``STOP_AT_CHECKPOINT``), so
    that the same command resumes it; the second raises KeyboardInterrupt, which cancels the job
    at once (output since the last checkpoint is discarded, as after a crash)."""

    def __init__(self, job, control_dir: Path, say):
        self.job, self.control_dir, self.say = job, control_dir, say
        self.signum: int | None = None
        self._previous = {}

    def __enter__(self) -> "_StopOnSignal":
        if threading.current_thread() is not threading.main_thread():
            return self  # (only the main thread may handle signals)
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _on_signal(self, signum, frame) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt
        self.signum = signum
        self.say(f"{signal.Signals(signum).name}: taking a last checkpoint, then stopping "
                 "(press Ctrl-C again to stop at once)")
        threading.Thread(target=self._ask, name="weir-stop", daemon=True).start()

    def _ask(self) -> None:
        try:
            answer = control.send(self.control_dir, control.STOP_AT_CHECKPOINT, timeout=STOP_TIMEOUT)
        except EngineError:  # the job ended first, or its control channel is not open yet
            answer = {"ok": False}
        if not answer.get("ok"):
            self.job.stop(savepoint=False)  # (nothing, if it has ended)

    @property
    def exit_code(self) -> int:
        """As shells expect: 130 after Ctrl-C (128 + SIGINT), so that `weir run a.sql && b` stops
        there; 0 after SIGTERM, the way a service is asked to stop."""
        return 128 + signal.SIGINT if self.signum == signal.SIGINT else 0


def run(args, script: Script) -> int:
    """Run the planned file as a job of a Python API connection (``shell/api.py``), the main
    thread drawing the progress line from the job's published metrics until it ends (or a
    signal stops it at a checkpoint: ``_StopOnSignal``)."""
    err_tty = sys.stderr.isatty()
    show_progress = err_tty and not args.no_progress

    def warn(message: str) -> None:
        print(("\r\x1b[2K" if show_progress else "") + f"warning: {message}", file=sys.stderr, flush=True)

    connection = Connection(args.db, state_dir=Path(".weir"))
    job_state = state_dir(args, script.graph.name, script)
    stopper = server = None
    try:
        job = connection.start_script(script, state_dir=job_state,
                                      from_savepoint=args.from_savepoint, fresh=getattr(args, "fresh", False),
                                      warn=warn)
        if getattr(args, "serve", False) or getattr(args, "flight", None):
            # after the job has started, so that a client's first SHOW JOBS lists it
            from weir.shell.pgwire import launch  # asyncio and the protocol load only for an endpoint
            server = _Endpoints()
            try:
                server.start(connection, args)
            except launch.ServeError as error:
                server.stop()
                job.stop(savepoint=False)
                return launch.report(error)
        try:
            with _StopOnSignal(job, job_state / "control", warn) as stopper:
                while True:
                    try:
                        job.wait(args.progress_interval)
                        break
                    except TimeoutError:
                        if show_progress:
                            print("\r\x1b[2K" + _progress_line(job), end="", file=sys.stderr, flush=True)
        except KeyboardInterrupt:
            job.stop(savepoint=False)
            raise
    except EngineError as error:
        if show_progress:
            print(file=sys.stderr)
        print(render.engine_error(error, err_tty), file=sys.stderr)
        if server is not None:
            server.stop()
        return 1
    except BaseException:
        if server is not None:
            server.stop()
        raise
    finally:
        connection.session.jobs.join_all()
    result = job.result
    if show_progress:
        print("\r\x1b[2K", end="", file=sys.stderr, flush=True)
    if result is None:  # cancelled: stopped by a signal before it could take a checkpoint
        print(f"job {script.graph.name} was cancelled; its output up to its last checkpoint stays, and "
              f"`weir run {args.file}` resumes it from there", file=sys.stderr)
        if server is not None:
            server.stop()
        return stopper.exit_code if stopper is not None and stopper.signum is not None else 130
    print(render.summary(result, db_path=args.db, views=script.materialized_views,
                         late_rows_tables=script.late_rows_tables))
    if getattr(args, "analyze", False) and not result.already_finished:
        print()
        print(explain(script.graph, f"job {script.graph.name}, as run", {m.id: m for m in result.operators}), end="")
    if stopper is not None and stopper.signum is not None:  # stopped by a signal: the server goes too
        if server is not None:
            server.stop()
        if result.stopped_with is not None:
            print(f"run the same command again to resume the job from checkpoint {result.stopped_with.checkpoint_id}")
        return stopper.exit_code
    if server is not None:
        sys.stdout.flush()
        server.keep_serving()
    return 0


class _Endpoints:
    """`weir run --serve` / `--flight`: the Postgres and Arrow Flight SQL endpoints started beside
    the job, stopped together."""

    def __init__(self) -> None:
        self.postgres = self.flight = None

    def start(self, connection: Connection, args) -> None:
        if getattr(args, "serve", False):
            from weir.shell.pgwire import launch
            self.postgres = launch.start_beside(connection, args)
        if getattr(args, "flight", None):
            from weir.shell.flightsql import launch as flight_launch  # gRPC loads only for --flight
            self.flight = flight_launch.start(args)

    def stop(self) -> None:
        for server in (self.postgres, self.flight):
            if server is not None:
                server.stop()

    def keep_serving(self) -> None:
        """After the job has ended: serve its results until Ctrl-C."""
        if self.postgres is not None:
            from weir.shell.pgwire import launch
            launch.keep_serving(self.postgres)  # stops the Postgres server at Ctrl-C
            self.stop()
            return
        print("the job has ended; still serving Arrow Flight SQL clients (Ctrl-C stops)", file=sys.stderr, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()


def _progress_line(job) -> str:
    metrics = job.metrics()
    progress = Progress(metrics.rows_in, metrics.elapsed, metrics.watermark, metrics.rows_out)
    event = metrics.last_checkpoint_event
    return render.progress_line(progress) + (f"  {render.checkpoint_text(event)}" if event is not None else "")


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
        answer = control.send(_control_dir(args), kind, args.path or None,
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
