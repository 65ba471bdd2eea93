"""Running a job the way `weir run` does: checkpoints configured from the job's
settings, a state directory, a control channel, and the restart strategy."""
from __future__ import annotations

import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from weir.engine.checkpoint.coordinator import AlreadyFinished, CheckpointConfig, CheckpointEvent
from weir.engine.checkpoint.files import children, is_dir, remove_directory, remove_file
from weir.engine.checkpoint.location import Location, parse_location, same_place
from weir.engine.checkpoint.state_files import safe_name
from weir.engine.checkpoint.storage import CheckpointStorage
from weir.engine.connectors.options import parse_duration_seconds, parse_int
from weir.engine.connectors.registry import connector_spec, create_source
from weir.engine.errors import EngineError, JobCancelled
from weir.engine.graph import JobGraph
from weir.engine.operators.registry import operator_class
from weir.engine.runtime.control import LOCK_FILE, ControlChannel, lock_state_dir
from weir.engine.runtime.exchange import two_phase
from weir.engine.runtime.local import JobResult, LocalExecutor, Progress
from weir.engine.runtime.parallel import ProcessExecutor, check_parallelism


@dataclass
class JobOptions:
    #: This machine's directory of the job: its lock, control channel and spill files, and its
    #: checkpoints and savepoints unless 'state.checkpoints.dir' / 'state.savepoints.dir' say where.
    state_dir: Path
    #: A savepoint's (or retained checkpoint's) directory or URI (``checkpoint.location``).
    from_savepoint: "Location | str | None" = None
    on_progress: Callable[[Progress], None] | None = None
    progress_interval: float = 0.5
    on_checkpoint: Callable[[CheckpointEvent], None] | None = None
    warn: Callable[[str], None] = field(default=lambda message: None)
    #: Called with each executor as it starts, e.g. to cancel it from another thread.
    on_executor: Callable[[LocalExecutor], None] | None = None
    #: Start over (--fresh): forget the job's checkpoints and withdraw what it published.
    fresh: bool = False
    #: Empty the state directory first (once it is locked) and treat the job as new, so that no
    #: earlier output is reconciled: the shell's jobs, each a new job in a directory of its own.
    new_job: bool = False


#: Seconds between checkpoints of a job over an unbounded source that commits output
#: transactionally, when no interval is set (RisingWave's barrier interval): its views are fresh.
FRESH_INTERVAL_SECONDS = 1.0


def fresh_by_default(graph: JobGraph) -> bool:
    """A job whose output shows only at checkpoints — it reads an unbounded source and keeps a
    materialized view or writes a transactional sink — checkpoints every ``FRESH_INTERVAL_SECONDS``
    unless its settings say otherwise; any other job checkpoints only when told to."""
    unbounded = transactional = False
    for node in graph.nodes:
        kind = operator_class(node.kind)
        if kind.reads_source:
            options = node.typed_config().options
            unbounded = unbounded or not create_source(options, node.output_schema).bounded
        elif kind.commits_output:
            options = node.connector_options()
            sink = connector_spec(options["connector"]).sink
            transactional = transactional or bool(sink is not None and sink.commits_transactionally(options))
    return unbounded and transactional


CHECKPOINTS_DIR, SAVEPOINTS_DIR = "state.checkpoints.dir", "state.savepoints.dir"


def checkpoint_locations(graph: JobGraph, options: JobOptions) -> tuple[Location, Location]:
    """Where the job's checkpoints and its savepoints (when asked for without a path) go.

    Without settings: ``<state dir>/checkpoints`` and ``<state dir>/savepoints``, on this
    machine. 'state.checkpoints.dir' = D (a directory or a filesystem URI every node reaches:
    ``file:///shared``, ``s3://bucket/prefix``) puts them at ``D/<job>/checkpoints`` and
    ``D/<job>/savepoints``, as Flink puts a job's checkpoints in a folder of its own under
    that key; 'state.savepoints.dir' = S puts savepoints at ``S/<job>``. ``<job>`` is the job
    name; a new job of the shell's (``new_job``) gets a folder of its own (name and a random
    suffix), where its state directory is new too, so that it never resumes another's."""
    settings = graph.settings
    job = safe_name(graph.name)
    if options.new_job:
        job = f"{job}-{uuid.uuid4().hex[:8]}"
    checkpoints, savepoints = options.state_dir / "checkpoints", options.state_dir / "savepoints"
    if settings.get(CHECKPOINTS_DIR):
        root = parse_location(settings[CHECKPOINTS_DIR], f"'{CHECKPOINTS_DIR}'")
        checkpoints, savepoints = root / job / "checkpoints", root / job / "savepoints"
    if settings.get(SAVEPOINTS_DIR):
        savepoints = parse_location(settings[SAVEPOINTS_DIR], f"'{SAVEPOINTS_DIR}'") / job
    return checkpoints, savepoints


def checkpoint_config(graph: JobGraph, options: JobOptions) -> CheckpointConfig:
    settings = graph.settings
    interval = settings.get("execution.checkpointing.interval")
    batches = settings.get("weir.checkpointing.interval-batches")
    if interval is None and batches is None and fresh_by_default(graph):
        interval = f"{FRESH_INTERVAL_SECONDS:g}s"
    timeout = settings.get("execution.checkpointing.timeout", "10min")
    retained = parse_int("state.checkpoints.num-retained", settings.get("state.checkpoints.num-retained", "3"),
                         minimum=1)
    checkpoints, savepoints = checkpoint_locations(graph, options)
    restore = options.from_savepoint
    return CheckpointConfig(
        storage=CheckpointStorage(checkpoints, retained=retained),
        interval=parse_duration_seconds("execution.checkpointing.interval", interval) if interval else None,
        interval_batches=parse_int("weir.checkpointing.interval-batches", batches, minimum=1) if batches else None,
        savepoint=parse_location(restore, "the savepoint to start from") if restore is not None else None,
        savepoint_dir=savepoints,
        timeout=parse_duration_seconds("execution.checkpointing.timeout", timeout),
    )


def _restart_policy(settings: dict[str, str]) -> tuple[int, float]:
    """(attempts, delay in seconds) of the restart strategy."""
    kind = settings.get("restart-strategy.type", "none")
    if kind in ("none", "disable", "off"):
        return 0, 0.0
    if kind != "fixed-delay":
        raise EngineError(f"unknown restart strategy '{kind}'", hint="use 'none' or 'fixed-delay'")
    attempts = parse_int("restart-strategy.fixed-delay.attempts",
                         settings.get("restart-strategy.fixed-delay.attempts", "3"))
    delay = parse_duration_seconds("restart-strategy.fixed-delay.delay",
                                   settings.get("restart-strategy.fixed-delay.delay", "1s"))
    return attempts, delay


#: Where a job's workers run ('execution.target'): processes of this machine, or Ray actors.
EXECUTION_TARGETS = ("local", "ray")


def execution_target(settings: dict[str, str]) -> str:
    target = str(settings.get("execution.target") or "local").strip().lower()
    if target not in EXECUTION_TARGETS:
        raise EngineError(f"unknown execution target '{target}'",
                          hint="use 'local' (processes of this machine) or 'ray' (actors of a Ray cluster)")
    return target


def _forget_other_history(config: CheckpointConfig) -> None:
    """A job started from a savepoint begins a new history: its checkpoints would be wrong to
    resume from later, so they go — except the one being resumed from, when the savepoint is a
    retained checkpoint of this job (Flink's ``-s .../chk-4``): that one is read, and kept."""
    savepoint = config.savepoint
    if savepoint.name == "_metadata":
        savepoint = savepoint.parent
    config.savepoint = savepoint
    directory = config.storage.directory
    if not is_dir(directory):
        return
    if not same_place(savepoint.parent, directory):
        remove_directory(directory)
        return
    for child, child_is_dir in children(directory):
        if not same_place(child, savepoint):
            remove_directory(child) if child_is_dir else remove_file(child)


def _finished_text(graph: JobGraph, event: CheckpointEvent) -> str:
    """What a run of a finished job says: which checkpoint finished it, and where its output is."""
    places = []
    for node in graph.nodes:
        if operator_class(node.kind).commits_output:
            options = node.connector_options()
            where = options.get("path")
            if options.get("table-name"):
                where = f"table {options['table-name']} in {where}"
            if where and where not in places:
                places.append(where)
    output = f"; its output is in {', '.join(places)}" if places else ""
    return (f"job {graph.name} had already finished: its final checkpoint {event.checkpoint_id} "
            f"({event.path}) is committed{output}. Nothing was run and nothing was written; "
            "to run it again from the start, replacing that output, use --fresh")


def run_job(graph: JobGraph, options: JobOptions) -> JobResult:
    """Run ``graph`` to the end (or until stopped), resuming from its latest
    checkpoint in ``options.state_dir`` if an earlier run did not finish. If
    the latest checkpoint is the final one of a finished run, nothing runs: the
    result says so (``already_finished``) and the output stays as it is.

    The state directory is locked for the whole run (``control.lock_state_dir``):
    a second run on it fails before touching anything there.

    A failure restarts the job from its latest checkpoint while the restart
    strategy allows; then the error is raised, naming the operator."""
    config = checkpoint_config(graph, options)
    config.reconcile, config.fresh = not options.new_job, options.fresh
    attempts, delay = _restart_policy(graph.settings)
    backend = graph.settings.get("state.backend", "duckdb")
    if backend not in ("duckdb", "memory"):
        raise EngineError(f"unknown state backend '{backend}'", hint="use 'duckdb' (spills to disk) or 'memory'")
    two_phase(graph.settings)  # a bad 'table.optimizer.agg-phase-strategy' fails before the job starts
    parallelism = parse_int("parallelism.default", graph.settings.get("parallelism.default", "1"), minimum=1)
    check_parallelism(graph, parallelism)
    if execution_target(graph.settings) == "ray":  # Ray missing or unreachable fails here, not in a restart
        from weir.engine.runtime.ray_executor import connect

        connect(graph.settings.get("ray.address"))
    lock = lock_state_dir(options.state_dir)
    try:
        return _run_locked(graph, options, config, attempts, delay, backend, parallelism)
    finally:
        lock.release()


def _run_locked(graph: JobGraph, options: JobOptions, config: CheckpointConfig, attempts: int, delay: float,
                backend: str, parallelism: int) -> JobResult:
    if options.new_job:
        for entry in options.state_dir.iterdir():
            if entry.name != LOCK_FILE:
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    if options.fresh and options.from_savepoint is not None:
        raise EngineError("--fresh starts a job over from the beginning; --from-savepoint resumes it",
                          hint="give one of them")
    if options.fresh:
        # The finished checkpoint goes first: from then on no run reports the job finished, and
        # every run starts from the beginning, withdrawing the old output (sinks' commit logs).
        remove_directory(config.storage.directory)
    elif options.from_savepoint is not None:
        _forget_other_history(config)
    target = execution_target(graph.settings)
    control = ControlChannel(options.state_dir / "control")
    control.open()
    try:
        for attempt in range(attempts + 1):
            common = dict(on_progress=options.on_progress, progress_interval=options.progress_interval,
                          on_checkpoint=options.on_checkpoint, warn=options.warn, control=control,
                          state_backend=backend, spill_dir=str(options.state_dir / "spill"))
            if target == "ray":
                from weir.engine.runtime.ray_executor import RayExecutor  # imports Ray: only when chosen

                executor = RayExecutor(graph, parallelism, checkpoints=config,
                                       address=graph.settings.get("ray.address"), **common)
            elif parallelism > 1:
                executor = ProcessExecutor(graph, parallelism, checkpoints=config, **common)
            else:
                executor = LocalExecutor(graph, checkpoints=config, **common)
            if options.on_executor is not None:
                options.on_executor(executor)
            try:
                return executor.run()
            except AlreadyFinished as finished:
                return JobResult(graph.name, [], 0, 0.0, [finished.event], None, True,
                                 finished_before=_finished_text(graph, finished.event))
            except JobCancelled:
                raise
            except EngineError as error:
                if attempt == attempts:
                    raise
                if config.storage.completed():
                    config.savepoint = None  # resume from the newest checkpoint, taken after the savepoint
                options.warn(f"job {graph.name} failed ({error.message}); restarting from its latest "
                             f"checkpoint in {delay:g} s (restart {attempt + 1} of {attempts})")
                time.sleep(delay)
    finally:
        control.close()
    raise AssertionError("unreachable")
