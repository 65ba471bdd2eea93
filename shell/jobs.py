"""The shell's jobs: each runs a JobGraph in a background thread.

A job has a short id (`j1`, `j2`, ...) to type in `STOP JOB 'j1'`. Its
status goes RUNNING -> FINISHED, FAILED, CANCELED (stopped by the user) or
STOPPED (stopped with a savepoint). ``SHOW JOBS`` reads each job's
``JobMetrics``: a snapshot the job's own thread replaces whole at every
progress report and checkpoint, so another thread never reads the executor.

A job runs as `weir run` runs one (``engine.runtime.job.run_job``): at
'parallelism.default', with the restart strategy, in a locked state directory
of its own (``.weir/shell/<id>``, emptied first), and STOP JOB ... WITH
SAVEPOINT asks it through its control channel, as `weir stop` does.
"""
from __future__ import annotations

import contextvars
import itertools
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from weir.engine.errors import EngineError, JobCancelled
from weir.engine.graph import JobGraph
from weir.engine.messages import MIN_WATERMARK
from weir.engine.operators.registry import operator_class
from weir.engine.runtime import control
from weir.engine.runtime.job import JobOptions, run_job
from weir.engine.runtime.local import JobResult, LocalExecutor, Progress
from weir.engine.runtime.parallel import ProcessExecutor

RUNNING, FINISHED, FAILED, CANCELED, STOPPED = "RUNNING", "FINISHED", "FAILED", "CANCELED", "STOPPED"
#: Seconds between a running job's metrics snapshots.
METRICS_INTERVAL = 0.2


@dataclass(frozen=True)
class JobMetrics:
    """A job's figures as its own thread last published them. Immutable and replaced whole
    (one reference assignment), so any thread may read the latest one."""

    rows_in: int = 0
    #: Rows that reached the sinks (a parallel job's workers report theirs at its end).
    rows_out: int = 0
    watermark: int = MIN_WATERMARK
    #: The latest completed checkpoint or savepoint, '-' before the first.
    last_checkpoint: str = "-"
    #: Each operator's figures (rows in and out, late rows dropped), in plan order. A parallel
    #: job's workers are other processes: their operators' figures arrive at the job's end.
    operators: tuple["OperatorFigures", ...] = ()
    #: Rows dropped as late by every operator together.
    late_rows: int = 0
    #: Rows a Python UDF raised on, kept in the bad-rows table ('python.udf.bad-rows.table').
    udf_bad_rows: int = 0
    #: Seconds the current attempt has run, at the last progress report.
    elapsed: float = 0.0
    #: The latest completed checkpoint's event (its kind, size, duration), None before the first.
    last_checkpoint_event: object = None


@dataclass(frozen=True)
class OperatorFigures:
    id: str
    kind: str
    rows_in: int
    rows_out: int
    late_rows: int = 0


@dataclass
class Job:
    id: str
    name: str
    #: What started it: 'insert', 'materialized view' or 'select'.
    kind: str
    graph: JobGraph
    #: Where the job checkpoints, and its control channel (``control/``).
    state_dir: Path
    from_savepoint: Path | None = None
    #: The executor of the current attempt (a restart makes a new one); None until it is built.
    executor: LocalExecutor | ProcessExecutor | None = None
    status: str = RUNNING
    error: EngineError | None = None
    result: JobResult | None = None
    savepoint: str | None = None
    started: float = field(default_factory=time.time)
    done: threading.Event = field(default_factory=threading.Event)
    #: Set once the job's control channel is open (it can answer STOP JOB ... WITH SAVEPOINT).
    started: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    #: Set when the user asked to stop it, so that JobCancelled means CANCELED.
    stopping: bool = False
    #: How it runs (``JobManager.start``): in a new, emptied state directory (the shell's), or
    #: resuming in its own as `weir run` does; ``fresh`` starts that over.
    new_job: bool = True
    fresh: bool = False
    warn: Callable[[str], None] | None = None
    #: The latest snapshot of its figures (``JobMetrics``), published by the job's thread.
    metrics: JobMetrics = field(default_factory=JobMetrics)
    #: Notified whenever the job's thread publishes metrics, completes a checkpoint or ends.
    changed: threading.Condition = field(default_factory=threading.Condition)

    @property
    def running(self) -> bool:
        return self.status == RUNNING

    def rows_in(self) -> int:
        return self.metrics.rows_in

    def rows_out(self) -> int:
        return self.metrics.rows_out

    def watermark(self) -> int:
        return self.metrics.watermark

    def last_checkpoint(self) -> str:
        return self.metrics.last_checkpoint

    # -- published by the job's own thread -------------------------------------------------

    def on_progress(self, progress: Progress) -> None:
        self._publish(replace(self.metrics, rows_in=progress.rows_read, rows_out=progress.rows_written,
                              watermark=progress.watermark, elapsed=progress.elapsed,
                              **self._operator_figures()))

    def on_checkpoint(self, event) -> None:
        self._publish(replace(self.metrics, last_checkpoint=str(event.checkpoint_id), last_checkpoint_event=event))

    def on_result(self, result: JobResult) -> None:
        """The final figures: every worker's, summed."""
        checkpoints = result.checkpoints
        figures = {}
        for m in result.operators:  # a parallel job has one entry per operator and worker
            known = figures.get(m.id) or OperatorFigures(m.id, m.kind, 0, 0, 0)
            figures[m.id] = OperatorFigures(m.id, m.kind, known.rows_in + m.rows_in, known.rows_out + m.rows_out,
                                            known.late_rows + sum(m.late_by_source.values()))
        # The watermark as the run ended: a job shorter than the metrics interval published none.
        progress = getattr(self.executor, "progress", None)
        watermark = max(self.metrics.watermark, progress().watermark) if progress is not None else self.metrics.watermark
        self._publish(replace(
            self.metrics, rows_in=result.rows_read, watermark=watermark,
            rows_out=sum(m.rows_in for m in result.operators if operator_class(m.kind).commits_output),
            last_checkpoint=str(checkpoints[-1].checkpoint_id) if checkpoints else self.metrics.last_checkpoint,
            operators=tuple(figures.values()) or self.metrics.operators,
            late_rows=sum(result.late_rows_by_source().values()), udf_bad_rows=result.counter("udf_bad_rows")))

    def _operator_figures(self) -> dict:
        """Each operator's figures so far, read in the job's own thread (which is running the
        executor's tasks); none for a parallel executor, whose tasks are in its workers."""
        tasks = getattr(self.executor, "tasks", None)
        if not isinstance(self.executor, LocalExecutor) or not tasks:
            return {}
        figures = tuple(
            OperatorFigures(t.node.id, t.node.kind, t.metrics.rows_in,
                            t.reader.rows_read if t.reader is not None else t.metrics.rows_out,
                            sum(t.ctx.late_by_source.values()))
            for t in tasks.values())
        return {"operators": figures, "late_rows": sum(f.late_rows for f in figures),
                "udf_bad_rows": sum(t.ctx.metrics.get("udf_bad_rows", 0) for t in tasks.values())}

    def _publish(self, metrics: JobMetrics) -> None:
        with self.changed:
            self.metrics = metrics
            self.changed.notify_all()

    def _ended(self) -> None:
        with self.changed:
            self.done.set()
            self.changed.notify_all()


class JobManager:
    def __init__(self, on_done: Callable[[Job], None] | None = None, state_root: Path = Path(".weir") / "shell"):
        self.jobs: dict[str, Job] = {}
        self.state_root = state_root
        self.on_done = on_done
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()

    def start(self, graph: JobGraph, kind: str, *, from_savepoint: Path | None = None,
              state_dir: Path | None = None, fresh: bool = False,
              warn: Callable[[str], None] | None = None) -> Job:
        """Start ``graph`` in the background. Each job checkpoints into a state directory of
        its own, started empty, so that STOP JOB ... WITH SAVEPOINT works (and SET
        'execution.checkpointing.interval'). Given a ``state_dir``, the job runs there as
        `weir run` runs one: resuming from its latest checkpoint, or reporting that it had
        already finished (``fresh``: starting over)."""
        with self._lock:
            job_id = f"j{next(self._numbers)}"
        job = Job(job_id, graph.name, kind, graph, state_dir or self.state_root / job_id, from_savepoint)
        job.new_job, job.fresh, job.warn = state_dir is None, fresh, warn
        self.jobs[job_id] = job
        # The job's thread runs in a copy of this context: its operators call the Python UDFs of
        # the session that started it (``engine.udfs.scope``), not another session's.
        context = contextvars.copy_context()
        job.thread = threading.Thread(target=context.run, args=(self._run, job), name=f"weir-job-{job_id}",
                                      daemon=True)
        job.thread.start()
        return job

    def _run(self, job: Job) -> None:
        def on_executor(executor) -> None:
            job.executor = executor
            if job.stopping and not job.savepoint:
                executor.cancel()  # cancelled before this attempt was built
            job.started.set()

        options = JobOptions(state_dir=job.state_dir, from_savepoint=job.from_savepoint, on_executor=on_executor,
                             new_job=job.new_job, fresh=job.fresh, on_progress=job.on_progress,
                             progress_interval=METRICS_INTERVAL, on_checkpoint=job.on_checkpoint)
        if job.warn is not None:
            options.warn = job.warn
        try:
            result = run_job(job.graph, options)
            job.on_result(result)
            job.result = result
            job.status = STOPPED if job.result.stopped_with else FINISHED
        except JobCancelled:
            job.status = STOPPED if job.savepoint else CANCELED
        except EngineError as error:
            job.status, job.error = FAILED, error
        except Exception as error:  # a bug: keep the shell alive and say what happened
            job.status, job.error = FAILED, EngineError(f"{type(error).__name__}: {error}")
        finally:
            job.started.set()
            job._ended()
            if self.on_done is not None:
                self.on_done(job)

    def get(self, job_id: str) -> Job | None:
        return self.jobs.get(job_id) or self.jobs.get(job_id.lower())

    def running(self) -> list[Job]:
        return [job for job in self.jobs.values() if job.running]

    def cancel(self, job: Job, wait: float | None = 30.0) -> None:
        job.stopping = True
        if job.executor is not None:
            job.executor.cancel()
        job.done.wait(wait)

    def stop_with_savepoint(self, job: Job, wait: float | None = 30.0) -> str:
        """Stop the job with a savepoint (through its control channel, as `weir stop` does)
        and return where the savepoint is."""
        job.started.wait(wait)
        if job.done.is_set():
            raise EngineError(f"job {job.id} ended before it could take a savepoint: it is {job.status}")
        answer = control.send(job.state_dir / "control", "stop", timeout=wait or 300.0)
        if not answer.get("ok"):
            raise EngineError(f"job {job.id} took no savepoint: {answer.get('error')}")
        job.stopping = True
        job.savepoint = answer["path"]
        job.done.wait(wait)
        return job.savepoint

    def join_all(self, timeout: float = 30.0) -> None:
        """Wait for every job's thread to end: a thread still inside DuckDB or
        Arrow when the interpreter exits would abort the process."""
        for job in list(self.jobs.values()):
            if job.thread is not None:
                job.thread.join(timeout)

    def cancel_all(self) -> list[Job]:
        running = self.running()
        for job in running:
            job.stopping = True
            if job.executor is not None:
                job.executor.cancel()
        for job in running:
            job.done.wait(30.0)
        return running
