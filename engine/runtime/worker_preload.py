"""What the fork server of a parallel job's workers imports, once, before it forks any
(``workers.PRELOAD``): the runtime and every operator.

A worker imports the modules of its job's operators when it builds them; each one imported here
is imported once per server, which loads while the coordinator plans, instead of once by every
worker of every job, while the job waits for it. Connectors are not preloaded: a job loads only
its own (a worker imports its job's, a few ms; tests/shell/test_startup.py). Only modules:
nothing here starts a thread, opens a database or reads a file, as nothing may before a fork.
"""
from __future__ import annotations

import gc

import weir.engine.runtime.parallel  # noqa: F401  (the worker's entry point: ``parallel._worker``)
from weir.engine.operators.registry import KINDS

KINDS.load_all()

# What the server has loaded lives as long as it: out of every collection of the workers forked
# from it, which would otherwise walk those objects (copying the pages they share with the server).
gc.freeze()
