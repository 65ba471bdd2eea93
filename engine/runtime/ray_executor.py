"""Running a job at parallelism N on a Ray cluster: N Ray actors, one coordinator.

The same job as ``parallel.ProcessExecutor``'s, driven the same way: this
executor *is* that coordinator (its loop, checkpoints, commits and restore), and
each actor runs ``parallel.run_subtask`` — subtask i of every operator, the
worker a spawned process runs. Only where the workers run and how they are
wired differ:

- Ray places the N actors (``scheduling_strategy="SPREAD"``: over the nodes),
  one Python process each, with ``max_restarts=0``: Ray restarts nothing. A
  dead actor ends its connections, the coordinator fails the job
  (``_died``), and weir's own restart strategy ('restart-strategy.type',
  ``job.run_job``) runs it again from its latest checkpoint on new actors —
  as for the process executor. An actor Ray reports dead without its sockets
  ending (a node lost) is noticed by polling the actors' calls (``_checkpoints``).
  The actors are not detached: a dead driver's are ended by Ray.
- How many actors: 'parallelism.default', or with 'jobmanager.scheduler' =
  'adaptive' (Flink's adaptive scheduler) at most what the live nodes have room
  for, decided at each start and restart (``_place``): a node lost for good
  leaves the job running on the rest, the checkpoint's key groups spread over
  fewer workers. Not adaptive, a lack of room fails the start after
  'slot.request.timeout'.
- The data plane is weir's, not Ray's object store: each actor listens on its
  node's address (``multiprocessing.connection.Listener`` over TCP, with a
  key of the job's), connects to every peer, and the driver connects to each
  for its control connection. These are the same ``Connection`` objects the
  process executor's pipes are, so ``subtask.py`` and ``exchange.py`` run
  unchanged: Arrow IPC bodies go straight from node to node, one socket
  write per batch, where a Ray actor call costs about 3 ms (measured here:
  1.3-1.6M rows/s for 10,000-row batches between two actors).
- A state table too large for a snapshot in memory is staged on the actor's
  node's disk; the actor uploads it into the checkpoint storage itself before
  it sends its snapshot (``stage_to``; ``engine.checkpoint.staging``), and the
  driver moves it within that storage into the checkpoint.

Ray is imported only when this executor is chosen (``connect``).
"""
from __future__ import annotations

import os
import threading
import time
from multiprocessing.connection import Client, Connection, Listener

from weir.engine.checkpoint.location import location_text
from weir.engine.connectors.options import parse_duration_seconds
from weir.engine.errors import EngineError
from weir.engine.runtime.parallel import JOIN_SECONDS, ProcessExecutor, run_subtask

#: Seconds the cluster is given to place and start the N actors before the job fails; and, unless
#: 'slot.request.timeout' says otherwise (Flink's key), how long its live nodes may lack room for them.
START_SECONDS = 120.0
#: Seconds between two looks at whether Ray reports an actor dead (see ``_checkpoints``).
POLL_SECONDS = 1.0
#: What a connection's first message says of the side that opened it: the driver, or peer i.
DRIVER = -1
#: Environment variables a worker actor is given from the driver's (fault points, for tests).
FORWARDED_PREFIX = "WEIR_"


def connect(address: str | None):
    """The ``ray`` module, connected to the cluster at ``address`` ('auto': the one started on
    this machine with `ray start`; None: RAY_ADDRESS, else a new Ray on this machine). A driver
    already connected keeps its connection."""
    try:
        import ray
    except ImportError:
        raise EngineError("'execution.target' is 'ray' but Ray is not installed",
                          hint="pip install 'weir[ray]'") from None
    if not ray.is_initialized():
        try:
            ray.init(address=address or None, include_dashboard=False, log_to_driver=True,
                     configure_logging=False)
        except ConnectionError as error:
            raise EngineError(f"cannot connect to the Ray cluster at '{address}': {error}",
                              hint="start one with `ray start --head` (then 'auto' finds it), give its "
                                   "address as 'ray.address', or leave 'ray.address' unset for a Ray "
                                   "on this machine") from None
    return ray


def _first_line(error: BaseException) -> str:
    """What a Ray error says first (its text goes on with the remote traceback), or its kind."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


class SubtaskActor:
    """One worker of a job, as a Ray actor (made remote by ``RayExecutor``): ``listen``,
    then ``run`` until the subtask ends."""

    def __init__(self) -> None:
        self._listener: Listener | None = None

    def listen(self, authkey: bytes) -> tuple[tuple[str, int], int, str]:
        """Open this worker's listening socket on its node's address: that address, this
        process's id and its Ray node's (asked now: once ``run`` runs, the actor answers no other call)."""
        import ray

        self._listener = Listener((ray.util.get_node_ip_address(), 0), authkey=authkey)
        return self._listener.address, os.getpid(), ray.get_runtime_context().get_node_id()

    def run(self, subtask: int, addresses: list, authkey: bytes, graph_json: dict, parallelism: int,
            restore_from: str | None, backend: str, spill_dir: str | None, cwd: str,
            stage_to: str | None = None) -> None:
        """Connect to the peers and the driver, then run subtask ``subtask`` to its end.
        Relative paths of the job mean the driver's working directory (shared storage).
        ``stage_to``: the checkpoint storage, into which this worker uploads its staged state
        tables (its spill directory is on its node's disk, which the driver may not see)."""
        if os.path.isdir(cwd):
            os.chdir(cwd)
        accepted: dict[int, Connection] = {}

        def accept() -> None:  # the N-1 peers and the driver, while this worker connects to its peers
            for _ in range(parallelism):
                conn = self._listener.accept()
                accepted[conn.recv()] = conn

        acceptor = threading.Thread(target=accept, name=f"weir-accept-{subtask}", daemon=True)
        acceptor.start()
        peers_out = {}
        for j, address in enumerate(addresses):
            if j != subtask:
                peers_out[j] = Client(tuple(address), authkey=authkey)
                peers_out[j].send(subtask)
        acceptor.join(START_SECONDS)
        self._listener.close()
        if DRIVER not in accepted or len(accepted) < parallelism:
            raise EngineError(f"worker {subtask} was not reached by all of its peers and the driver "
                              f"within {START_SECONDS:g} s")
        control = accepted.pop(DRIVER)
        run_subtask(control, graph_json, subtask, parallelism, restore_from, backend, spill_dir,
                    accepted, peers_out, stage_to=stage_to)


class RayExecutor(ProcessExecutor):
    """``ProcessExecutor`` whose workers are Ray actors (see the module's text)."""

    def __init__(self, graph, parallelism: int, *, address: str | None = None, **options):
        super().__init__(graph, parallelism, **options)
        self.address = address
        self.actor_cpus = float(graph.settings.get("ray.actor.num-cpus", "1"))
        #: The parallelism asked for; ``self.parallelism`` is the one run at (lower only when adaptive).
        self.wanted_parallelism = parallelism
        self.adaptive = graph.settings.get("jobmanager.scheduler", "default").strip() == "adaptive"
        self.room_seconds = parse_duration_seconds(
            "slot.request.timeout", graph.settings.get("slot.request.timeout", f"{START_SECONDS:g}s"))
        self._ray = connect(address)
        self._actors: list = []
        self._calls: list = []  # each actor's ``run`` call (its ObjectRef)
        self._next_poll = 0.0
        #: Each worker actor's process id, once they have started (for tests that kill one).
        self.worker_pids: list[int] = []
        #: The Ray node each worker actor runs on.
        self.worker_nodes: list[str] = []

    def _start_workers(self, restore) -> None:
        """Start the N actors, then connect them to each other and to this driver (should this
        fail, ``run`` ends the actors started)."""
        ray = self._ray
        restore_from = location_text(self.coordinator.restored.path) if restore is not None else None  # a URI reaches every node
        authkey = os.urandom(32)
        options = dict(num_cpus=self.actor_cpus, max_restarts=0, max_task_retries=0, scheduling_strategy="SPREAD")
        env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_PREFIX)}
        if env:
            options["runtime_env"] = {"env_vars": env}
        listening = self._place(ray.remote(SubtaskActor).options(**options), authkey)
        addresses = [address for address, _, _ in listening]
        self.worker_pids = [pid for _, pid, _ in listening]
        self.worker_nodes = [node for _, _, node in listening]
        graph_json, cwd = self.graph.to_json(), os.getcwd()
        stage_to = location_text(self.coordinator.config.storage.directory)  # staged tables: uploaded there
        for subtask, actor in enumerate(self._actors):
            spill = f"{self.spill_dir}/subtask-{subtask}" if self.spill_dir else None
            self._calls.append(actor.run.remote(subtask, addresses, authkey, graph_json, self.parallelism,
                                                restore_from, self.state_backend, spill, cwd, stage_to))
        for subtask, address in enumerate(addresses):
            try:
                conn = Client(tuple(address), authkey=authkey)
                conn.send(DRIVER)
            except (OSError, EOFError):
                raise self._died(subtask) from None
            self._conns.append(conn)

    def _room(self) -> int:
        """How many worker actors the cluster's live nodes have CPUs for (whatever runs there now:
        a restart's actors take the place of the failed run's, which are ended first)."""
        return sum(int(node["Resources"].get("CPU", 0) / self.actor_cpus + 1e-9)
                   for node in self._ray.nodes() if node.get("Alive"))

    def _fit(self) -> None:
        """'jobmanager.scheduler' = 'adaptive': run at the parallelism the live nodes have room for,
        at most the one asked for (Flink's adaptive scheduler; the state's key groups are spread
        over however many workers restore it)."""
        room = self._room()
        if room < 1:
            raise EngineError(f"no live node of the Ray cluster has {self.actor_cpus:g} CPU for a worker actor "
                              f"of job {self.graph.name}", hint="add a node, or lower 'ray.actor.num-cpus'")
        parallelism = min(self.wanted_parallelism, room)
        if parallelism < self.wanted_parallelism and parallelism != self.parallelism:
            self.warn(f"job {self.graph.name} runs at parallelism {parallelism}, not {self.wanted_parallelism}: "
                      f"the Ray cluster's live nodes have room for {room} worker actors of {self.actor_cpus:g} CPU "
                      "('jobmanager.scheduler' = 'adaptive')")
        self.parallelism = parallelism

    def _place(self, actor_class, authkey: bytes) -> list:
        """Create the N actors and have each open its listening socket: what ``listen`` returns,
        one per actor. Should the live nodes lack room for N: adaptive, N becomes what fits
        (``_fit``) and the actors are placed again; else the job fails once they have lacked it
        for 'slot.request.timeout' (a node may come back, an autoscaler add one). Placed actors
        that start slowly (a loaded node) are waited for ``START_SECONDS``."""
        ray = self._ray
        deadline = time.monotonic() + START_SECONDS
        short_since: float | None = None  # since when the live nodes have had no room for N
        while True:
            if self.adaptive:
                self._fit()
            self._actors = [actor_class.remote() for _ in range(self.parallelism)]
            calls = [actor.listen.remote(authkey) for actor in self._actors]
            while True:
                ready, _ = ray.wait(calls, num_returns=len(calls), timeout=POLL_SECONDS)
                if len(ready) == len(calls):
                    try:
                        return ray.get(calls)
                    except ray.exceptions.RayError as error:  # e.g. weir cannot be imported on a node
                        if isinstance(error, ray.exceptions.RayActorError) and not error.actor_init_failed:
                            # Placed on a node that died meanwhile (one Ray still listed as alive), not
                            # an actor that fails to start: place them again, as for too little room.
                            for actor in self._actors:
                                ray.kill(actor, no_restart=True)
                            break
                        raise EngineError(
                            f"the worker actors of job {self.graph.name} could not start on the Ray cluster: "
                            f"{_first_line(error)}", hint="every node needs weir and its dependencies installed "
                                                          "in the same Python as the driver (pip install "
                                                          "'weir[ray]')") from None
                now, room = time.monotonic(), self._room()
                if room >= self.parallelism:
                    short_since = None
                elif self.adaptive:
                    for actor in self._actors:
                        ray.kill(actor, no_restart=True)
                    break
                else:
                    short_since = now if short_since is None else short_since
                    if now - short_since > self.room_seconds:
                        raise self._no_room(room)
                if now > deadline:
                    raise EngineError(
                        f"the {self.parallelism} worker actors of job {self.graph.name} did not start on the Ray "
                        f"cluster within {START_SECONDS:g} s (CPUs free: {ray.available_resources().get('CPU', 0):g})",
                        hint="see the Ray logs of the nodes (`ray logs`) for why the actors do not start")

    def _no_room(self, room: int) -> EngineError:
        timeout = self.graph.settings.get("slot.request.timeout", f"{START_SECONDS:g}s")
        return EngineError(
            f"the Ray cluster's live nodes have had room for {room} of the {self.parallelism} worker actors of job "
            f"{self.graph.name} ({self.actor_cpus:g} CPU each) for 'slot.request.timeout' ({timeout}), and "
            "'jobmanager.scheduler' is not 'adaptive'",
            hint="SET 'jobmanager.scheduler' = 'adaptive' to run at the parallelism that fits (also after a node "
                 "is lost), add nodes, lower 'parallelism.default', or give each actor less with "
                 "SET 'ray.actor.num-cpus' = '0.5'")

    def _checkpoints(self) -> None:
        super()._checkpoints()
        if time.monotonic() < self._next_poll:
            return
        self._next_poll = time.monotonic() + POLL_SECONDS
        ended, _ = self._ray.wait(self._calls, num_returns=len(self._calls), timeout=0)
        for call in ended:
            subtask = self._calls.index(call)
            if subtask not in self._results and self._failure(subtask, timeout=0) is not None:
                raise self._died(subtask, connected=True)

    def _failure(self, subtask: int, timeout: float) -> str | None:
        """Why worker ``subtask``'s actor call failed, if Ray says it did within ``timeout`` seconds."""
        ray = self._ray
        try:
            ray.get(self._calls[subtask], timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            return None
        except ray.exceptions.RayError as error:
            return _first_line(error)
        return None

    def _died(self, subtask: int, connected: bool = False) -> EngineError:
        """Worker ``subtask``'s connection ended, or (``connected``) Ray reports its actor dead
        while its connections are still open: its process lives on a node Ray has lost."""
        how = self._failure(subtask, timeout=JOIN_SECONDS) if subtask < len(self._calls) else None
        lost = " while its connections were open (its node lost?)" if connected else ""
        return EngineError(f"worker {subtask} of job {self.graph.name} (a Ray actor) died{lost}"
                           + (f": {how}" if how else ""),
                           hint="the job resumes from its latest checkpoint when run again")

    def _end_workers(self) -> None:
        """End every actor: one that reported its end has nothing left to do, any other failed
        or was cancelled. Waited for, as the process executor joins its workers: a restart's
        new actors must not meet the old ones in the state directory."""
        for conn in self._conns:
            conn.close()
        for actor in self._actors:
            self._ray.kill(actor, no_restart=True)
        if self._calls:
            self._ray.wait(self._calls, num_returns=len(self._calls), timeout=2 * JOIN_SECONDS)
